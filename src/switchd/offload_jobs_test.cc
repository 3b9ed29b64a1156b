// The offload decision across the jobs of a persistent switch (issue 46),
// on the switch's own cores and a manual clock: the group manager (JOIN,
// REPORT, LEAVE, the timings kept per shape), the offload controller and
// the reducer's per-operation decision, glued as inca-switchd glues them
// (GroupInfoOf, ApplyOffload). The hosts' operation times are given, not
// measured: real timing on shared cores is too noisy to test a decision.
#include <spdlog/spdlog.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "inca/cais/reducer.h"
#include "inca/control/offload_controller.h"
#include "membership/group_manager.h"
#include "switchd/switch_control.h"

namespace inca::switchd {
namespace {

using wire::MgmtMessage;
using wire::MgmtType;

constexpr uint16_t kRanks = 4;
constexpr uint16_t kChunks = 469;  // 4 MiB of f32 in 8,952-byte chunks
constexpr uint32_t kPayload = 8952;

struct Notices final : dp::PacketSink {
  int declined = 0;
  void Emit(dp::PortId, std::span<const uint8_t> p) override {
    wire::CaisPacketView v;
    if (wire::ParseCais(p, &v) == wire::CaisParseError::kOk &&
        v.header.has_flag(wire::cais_flags::kDeclined)) {
      ++declined;
    }
  }
};

// A switch that outlives its jobs; each job is 4 ranks on the same 4 hosts
// running `ops` all-reduces of 4 MiB, each taking switch_ms on the switch
// path and host_ms on the host path.
class PersistentSwitch {
 public:
  PersistentSwitch(double switch_ms, double host_ms) : switch_ms_(switch_ms), host_ms_(host_ms) {
    spdlog::set_level(spdlog::level::off);
    cais::CaisConfig cfg;
    cfg.sram_bytes = size_t{64} << 20;
    reducer_ = *cais::CaisReducer::Create(cfg);
    gm_ = std::make_unique<membership::GroupManager>(&ports_, &reducer_->rules(), 1000);
  }

  // Runs one job; returns how many of its operations ran on the host path.
  int Job(int ops) {
    ++job_;
    for (uint16_t r = 0; r < kRanks; ++r) Mgmt(MgmtType::kJoin, r);
    EXPECT_TRUE(gm_->group(0)->formed);
    int host = 0;
    for (int k = 0; k < ops; ++k) {
      controller_.Observe(control::Stats{}, now_);
      ApplyOffload(controller_.Plan(GroupInfoOf(*gm_, *gm_->group(0), now_), now_), *reducer_);
      const bool on_host = Declined(gm_->group(0)->seq_base + static_cast<uint32_t>(k) + 1);
      host += on_host ? 1 : 0;
      now_ += static_cast<dp::TimeNs>((on_host ? host_ms_ : switch_ms_) * 1e6);
      MgmtMessage m;
      m.type = MgmtType::kReport;
      m.report_bytes = uint64_t{kChunks} * kPayload;
      m.report_duration_us = static_cast<uint32_t>((on_host ? host_ms_ : switch_ms_) * 1e3);
      m.report_path = on_host ? wire::ReportPath::kHost : wire::ReportPath::kSwitch;
      Mgmt(m, 0);
      now_ += 10 * dp::kNsPerMs;
    }
    Mgmt(MgmtType::kLeave, 0);  // dissolves the group
    EXPECT_EQ(gm_->group(0), nullptr);
    now_ += 1000 * dp::kNsPerMs;  // the next job starts a second later
    return host;
  }
  const membership::GroupManager& groups() const { return *gm_; }

 private:
  static net::Endpoint Host(uint16_t r) {
    return *net::Endpoint::Parse("198.18.0." + std::to_string(r + 1) + ":5000");
  }
  void Mgmt(MgmtType type, uint16_t rank) {
    MgmtMessage m;
    m.type = type;
    Mgmt(m, rank);
  }
  void Mgmt(MgmtMessage m, uint16_t rank) {
    m.job = job_;
    m.group_id = 0;
    m.rank = rank;
    m.world_size = kRanks;
    m.port = wire::kAnyPort;
    (void)gm_->Handle(m, Host(rank), ++now_);
  }
  // Every rank's first chunk of operation `seq`: whether the switch declined
  // the operation.
  bool Declined(uint32_t seq) {
    wire::CaisHeader h;
    h.total_chunks = kChunks;
    h.seq_num = seq;
    h.payload_len = kPayload;
    std::vector<uint8_t> d(wire::kCaisHeaderBytes + kPayload);
    wire::SerializeCaisHeader(h, d);
    Notices out;
    for (uint16_t r = 0; r < kRanks; ++r) {
      reducer_->Process(d, gm_->group(0)->ranks[r]->port, now_, out);
    }
    EXPECT_TRUE(out.declined == 0 || out.declined == kRanks);  // the same for every rank
    return out.declined > 0;
  }

  double switch_ms_, host_ms_;
  membership::PortTable ports_;
  std::unique_ptr<cais::CaisReducer> reducer_;
  std::unique_ptr<membership::GroupManager> gm_;
  control::OffloadController controller_{control::OffloadControllerConfig{}};
  dp::TimeNs now_ = 0;
  uint64_t job_ = 0;
};

// Ten short jobs where the switch path is faster (40 against 60 ms): all on
// the switch. The first look at the host path waits for the explore budget
// (50 operations of the class), which the jobs reach together because the
// switch keeps their timings; the two samples a decision needs cost two
// operations in sixty. (Before: each job started afresh and looked at the
// host path once per size, one operation in six.)
TEST(OffloadJobsTest, TenShortJobsStayOnTheFasterSwitch) {
  PersistentSwitch sw(40, 60);
  std::vector<int> host;
  for (int j = 0; j < 10; ++j) host.push_back(sw.Job(6));
  for (int j = 0; j < 8; ++j) EXPECT_EQ(host[j], 0) << "job " << j;
  int total = 0;
  for (int h : host) total += h;
  EXPECT_LE(total, 2);
  EXPECT_EQ(sw.groups().timing_shapes(), 1u);
  EXPECT_EQ(sw.groups().timings_inherited(), 9u);
}

// The same jobs where the host path is faster (60 against 40 ms): once the
// budget allows a look at the host path and it has its two samples, the
// class moves there and stays, job after job.
TEST(OffloadJobsTest, ShortJobsStillMoveToAFasterHostPath) {
  PersistentSwitch sw(60, 40);
  std::vector<int> host;
  for (int j = 0; j < 16; ++j) host.push_back(sw.Job(6));
  EXPECT_EQ(host[0], 0);  // the model's choice, the switch, until measured
  for (int j = 13; j < 16; ++j) EXPECT_EQ(host[j], 6) << "job " << j;
}

}  // namespace
}  // namespace inca::switchd
