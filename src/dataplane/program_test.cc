#include "inca/dataplane/program.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace inca::dp {
namespace {

// A toy program: first byte 'A' aggregates, 'F' forwards to port 1 and 2,
// anything else is dropped as too short / no rule; 'X' drops without reason.
class ToyProgram final : public Program {
 public:
  std::string_view name() const override { return "toy"; }

 private:
  Outcome DoProcess(std::span<const uint8_t> p, PortId, TimeNs, PacketSink& out) override {
    if (p.empty()) return Outcome::Dropped(DropReason::kTooShort);
    if (p[0] == 'A') return Outcome::Aggregated();
    if (p[0] == 'F') {
      out.Emit(1, p);
      out.Emit(2, p);
      return Outcome::Forwarded();
    }
    if (p[0] == 'X') return Outcome::Dropped(DropReason::kNone);
    return Outcome::Dropped(DropReason::kNoRule);
  }
  void DoAdvance(TimeNs, PacketSink& out) override {
    const uint8_t tick[] = {'T'};
    out.Emit(3, tick);
  }
};

struct VectorSink final : PacketSink {
  std::vector<std::pair<PortId, std::vector<uint8_t>>> got;
  void Emit(PortId port, std::span<const uint8_t> p) override {
    got.emplace_back(port, std::vector<uint8_t>(p.begin(), p.end()));
  }
};

TEST(ProgramTest, CountsEveryVerdictAndConserves) {
  ToyProgram prog;
  VectorSink sink;
  const std::vector<std::vector<uint8_t>> packets = {{'A'}, {'F', 1}, {}, {'Z', 1, 2}, {'A'}};
  for (const auto& p : packets) prog.Process(p, 0, 0, sink);
  const auto& c = prog.counters();
  EXPECT_EQ(c.rx_packets, 5u);
  EXPECT_EQ(c.rx_bytes, 1u + 2u + 0u + 3u + 1u);
  EXPECT_EQ(c.aggregated, 2u);
  EXPECT_EQ(c.forwarded, 1u);
  EXPECT_EQ(c.dropped, 2u);
  EXPECT_EQ(c.drops_by_reason[static_cast<size_t>(DropReason::kTooShort)], 1u);
  EXPECT_EQ(c.drops_by_reason[static_cast<size_t>(DropReason::kNoRule)], 1u);
  EXPECT_EQ(c.tx_packets, 2u);
  EXPECT_EQ(c.tx_bytes, 4u);
  EXPECT_TRUE(c.Conserved());
  ASSERT_EQ(sink.got.size(), 2u);
  EXPECT_EQ(sink.got[1].first, 2);
}

TEST(ProgramTest, AdvanceEmissionsAreCounted) {
  ToyProgram prog;
  VectorSink sink;
  prog.Advance(10, sink);
  EXPECT_EQ(prog.counters().tx_packets, 1u);
  EXPECT_EQ(prog.counters().rx_packets, 0u);
  EXPECT_TRUE(prog.counters().Conserved());
}

TEST(ProgramTest, UnnamedDropBreaksConservation) {
  ToyProgram prog;
  VectorSink sink;
  prog.Process(std::vector<uint8_t>{'X'}, 0, 0, sink);
  EXPECT_FALSE(prog.counters().Conserved());
}

TEST(ProgramTest, EveryDropReasonIsDeclaredOnceWithAUniqueNameAndHelp) {
  std::set<std::string_view> names;
  const std::string doc = DropReasonsMarkdown();
  for (size_t i = 0; i < kDropReasonCount; ++i) {
    const auto r = static_cast<DropReason>(i);
    const std::string_view name = ToString(r);
    EXPECT_NE(name, "unknown") << i;
    EXPECT_TRUE(names.insert(name).second) << name << " named twice";
    EXPECT_EQ(name.find_first_not_of("abcdefghijklmnopqrstuvwxyz_"), std::string_view::npos)
        << name;
    EXPECT_EQ(DropReasonByName(name), r);
    EXPECT_GT(std::string_view(kDropReasons[i].help).size(), 5u) << name;
    if (i > 0) {
      EXPECT_NE(doc.find("| `" + std::string(name) + "` |"), std::string::npos) << name;
    }
  }
  EXPECT_EQ(DropReasonByName("no_such_reason"), DropReason::kCount);
  EXPECT_EQ(ToString(DropReason::kCount), "unknown");
  // Append only: values are exported (metrics labels by name, but also logs
  // and saved traces by number).
  EXPECT_EQ(static_cast<int>(DropReason::kTooShort), 1);
  EXPECT_EQ(static_cast<int>(DropReason::kOffloadDeclined), 24);
  EXPECT_EQ(static_cast<int>(DropReason::kGroupShare), 39);
  EXPECT_EQ(static_cast<int>(DropReason::kDisplaced), 41);
}

}  // namespace
}  // namespace inca::dp
