// The control API's figures are declared once (inca/control/stats.h): the
// checked-in stats.proto is what the tables generate, the compiled messages
// have exactly the tables' fields (names, stable numbers, types), the gRPC
// conversion carries every field, and a new entry in a fixture table shows
// up as a typed proto field that the same conversion fills.
#include "inca/control/stats.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "control/convert.h"
#include "control/stats_reflection.h"
#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/dynamic_message.h"
#include "google/protobuf/util/message_differencer.h"

namespace inca::control {
namespace {

namespace gp = google::protobuf;
using stats_internal::Overloaded;

// Every table entry is a field of `d` with the same name, number and a
// type that holds it; `d` has no field the table lacks.
template <typename S>
void ExpectTableIsMessage(StatTable<S> table, const gp::Descriptor* d) {
  std::set<int> numbers;
  for (const StatField<S>& f : table) {
    SCOPED_TRACE(f.name);
    EXPECT_TRUE(numbers.insert(f.number).second) << "field number used twice";
    const gp::FieldDescriptor* fd = d->FindFieldByNumber(f.number);
    ASSERT_NE(fd, nullptr) << d->name() << " has no field " << f.number;
    EXPECT_EQ(fd->name(), f.name);
    EXPECT_TRUE(stats_internal::TypeMatches(f.member.index(), fd));
    if (const auto* rep = std::get_if<Repeated>(&f.member)) {
      EXPECT_EQ(fd->message_type()->name(), rep->message);
    }
    // A counters block: its message has exactly the table's rows, uint64.
    if (const auto* b = std::get_if<counters::Block<S>>(&f.member)) {
      const gp::Descriptor* sub = fd->message_type();
      EXPECT_EQ(sub->name(), b->message);
      std::set<int> rows;
      for (size_t i = 0; i < b->size; ++i) {
        const counters::Row row = b->row(i);
        SCOPED_TRACE(row.json);
        EXPECT_TRUE(rows.insert(row.number).second) << "counter number used twice";
        const gp::FieldDescriptor* rf = sub->FindFieldByNumber(row.number);
        ASSERT_NE(rf, nullptr) << sub->name() << " has no field " << row.number;
        EXPECT_EQ(rf->name(), row.json);
        EXPECT_EQ(rf->cpp_type(), gp::FieldDescriptor::CPPTYPE_UINT64);
      }
      EXPECT_EQ(static_cast<size_t>(sub->field_count()), b->size) << sub->name();
    }
  }
  EXPECT_EQ(static_cast<size_t>(d->field_count()), table.size()) << d->name();
}

TEST(ControlStatsTest, CompiledMessagesHaveExactlyTheTablesFields) {
  ExpectTableIsMessage<Stats>(kStatsFields, pb::Stats::descriptor());
  ExpectTableIsMessage<GroupStats>(kGroupStatsFields, pb::GroupStats::descriptor());
  ExpectTableIsMessage<ShardStats>(kShardStatsFields, pb::ShardStats::descriptor());
  ExpectTableIsMessage<OlafStats>(kOlafStatsFields, pb::OlafStats::descriptor());
  ExpectTableIsMessage<OlafClusterInfo>(kOlafClusterFields, pb::OlafClusterStats::descriptor());
}

TEST(ControlStatsTest, CheckedInStatsProtoIsGenerated) {
  std::ifstream in(INCA_STATS_PROTO);
  ASSERT_TRUE(in) << INCA_STATS_PROTO;
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), StatsProto())
      << "proto/inca/control/v1/stats.proto is stale: build/release/bin/inca-switchd "
         "--stats-proto > proto/inca/control/v1/stats.proto";
}

// Sets every member of `s` to a value derived from its field number.
template <typename S>
void FillAll(StatTable<S> table, S* s) {
  for (const StatField<S>& f : table) {
    const auto n = static_cast<uint64_t>(f.number);
    std::visit(Overloaded{
                   [&](uint64_t S::*p) { s->*p = (n << 40) + 7; },
                   [&](uint32_t S::*p) { s->*p = static_cast<uint32_t>(n * 1000 + 1); },
                   [&](uint16_t S::*p) { s->*p = static_cast<uint16_t>(n * 100 + 2); },
                   [&](uint8_t S::*p) { s->*p = static_cast<uint8_t>(n + 3); },
                   [&](double S::*p) { s->*p = static_cast<double>(n) + 0.25; },
                   [&](bool S::*p) { s->*p = !(s->*p); },
                   [&](std::string S::*p) { s->*p = "v" + std::to_string(n); },
                   [&](DropMap S::*p) {
                     s->*p = {{"no_rule", n}, {"queue_full", n + 1}};
                   },
                   [](Repeated) {},
                   [&](const counters::Block<S>& b) {
                     for (size_t i = 0; i < b.size; ++i) {
                       *b.at(*s, i) = (n << 40) + (uint64_t(b.row(i).number) << 8) + 9;
                     }
                   },
               },
               f.member);
  }
}

// Every member of `a` and `b` the table names is equal.
template <typename S>
void ExpectSame(StatTable<S> table, const S& a, const S& b) {
  for (const StatField<S>& f : table) {
    std::visit(Overloaded{[&](Repeated) {},
                          [&](const counters::Block<S>& blk) {
                            for (size_t i = 0; i < blk.size; ++i) {
                              EXPECT_EQ(blk.get(a, i), blk.get(b, i))
                                  << f.name << "." << blk.row(i).json;
                            }
                          },
                          [&](auto S::*p) { EXPECT_EQ(a.*p, b.*p) << f.name; }},
               f.member);
  }
}

TEST(ControlStatsTest, EveryFieldSurvivesTheGrpcConversion) {
  Stats s;
  FillAll<Stats>(kStatsFields, &s);
  s.groups.resize(2);
  FillAll<GroupStats>(kGroupStatsFields, &s.groups[1]);
  s.shards.resize(2);
  FillAll<ShardStats>(kShardStatsFields, &s.shards[1]);
  pb::Stats p;
  ToProto(s, &p);
  pb::Stats again;
  ToProto(FromProto(p), &again);
  EXPECT_TRUE(gp::util::MessageDifferencer::Equals(p, again)) << p.DebugString();
  const Stats back = FromProto(p);
  ExpectSame<Stats>(kStatsFields, s, back);
  ASSERT_EQ(back.groups.size(), 2u);
  ExpectSame<GroupStats>(kGroupStatsFields, s.groups[1], back.groups[1]);
  ASSERT_EQ(back.shards.size(), 2u);
  ExpectSame<ShardStats>(kShardStatsFields, s.shards[1], back.shards[1]);
  // A shard's program block (6), row 1 (rx_packets).
  EXPECT_EQ(p.shards(1).program().rx_packets(), (uint64_t{6} << 40) + (1 << 8) + 9);
  // host is field 21; ingress_delay_samples row 5 of counters::kHostCounters.
  EXPECT_EQ(p.host().ingress_delay_samples(), (uint64_t{21} << 40) + (5 << 8) + 9);
  EXPECT_EQ(back.counters.ingress_delay_samples, (uint64_t{21} << 40) + (5 << 8) + 9);
  EXPECT_EQ(p.cais().completed_chunks(), (uint64_t{24} << 40) + (3 << 8) + 9);
  EXPECT_EQ(p.groups(1).counters().timeouts(), (uint64_t{11} << 40) + (8 << 8) + 9);
  EXPECT_EQ(p.drops().at("queue_full"), 14u);
  EXPECT_EQ(p.groups(1).group_id(), 4u);
  EXPECT_FALSE(p.conserved());

  OlafStats o;
  FillAll<OlafStats>(kOlafStatsFields, &o);
  o.clusters.resize(1);
  FillAll<OlafClusterInfo>(kOlafClusterFields, &o.clusters[0]);
  pb::OlafStats q;
  ToProto(o, &q);
  pb::OlafStats q2;
  ToProto(FromProto(q), &q2);
  EXPECT_TRUE(gp::util::MessageDifferencer::Equals(q, q2)) << q.DebugString();
  const OlafStats oback = FromProto(q);
  ExpectSame<OlafStats>(kOlafStatsFields, o, oback);
  ASSERT_EQ(oback.clusters.size(), 1u);
  ExpectSame<OlafClusterInfo>(kOlafClusterFields, o.clusters[0], oback.clusters[0]);
  EXPECT_EQ(q.policy(), "v1");
  // olaf is field 24; updates_cut_through row 3 of olaf::kOlafCounters.
  EXPECT_EQ(q.olaf().updates_cut_through(), (uint64_t{24} << 40) + (3 << 8) + 9);
  EXPECT_EQ(oback.server.olaf.updates_cut_through, (uint64_t{24} << 40) + (3 << 8) + 9);
  EXPECT_EQ(q.clusters(0).cluster_id(), 102u);
  EXPECT_TRUE(q.clusters(0).aom_valid());
}

// A counters struct with its table (inca/util/counters.h), as a program
// declares its counters; `added` is the one a developer just added.
struct FixtureCounters {
  uint64_t seen = 0;
  uint64_t added = 0;
};
constexpr counters::Counter<FixtureCounters> kFixtureCounters[] = {
    {1, "seen", "inca_fixture_seen_total", counters::Kind::kCounter, 1, "Seen.",
     &FixtureCounters::seen},
    {2, "added", "inca_fixture_added_total", counters::Kind::kCounter, 1, "Just added.",
     &FixtureCounters::added},
};

// A figure a developer adds: one member, one table entry.
struct FixtureStats {
  uint64_t packets = 0;
  double ratio = 0;
  uint16_t port = 0;
  std::string mode;
  DropMap drops;
  uint64_t added_counter = 0;  // the new one
  FixtureCounters counters;    // a counters table, embedded
};
constexpr StatField<FixtureStats> kFixtureFields[] = {
    {"packets", 1, &FixtureStats::packets, "Packets."},
    {"ratio", 2, &FixtureStats::ratio, "A ratio."},
    {"port", 3, &FixtureStats::port, "A port."},
    {"mode", 4, &FixtureStats::mode, "A mode."},
    {"drops", 5, &FixtureStats::drops, "By reason."},
    {"added_counter", 6, &FixtureStats::added_counter, "The counter just added."},
    {"counters", 7,
     counters::MakeBlock<FixtureStats, kFixtureCounters,
                         [](FixtureStats& s) -> FixtureCounters& { return s.counters; }>(
         "FixtureCounters"),
     "The fixture's counters table."},
};

// The message the fixture's text declares, built the way protoc would.
const gp::Descriptor* DescribeFixture(gp::DescriptorPool* pool) {
  gp::FileDescriptorProto file;
  file.set_name("fixture.proto");
  file.set_package("fixture");
  file.set_syntax("proto3");
  gp::DescriptorProto* counters_message = file.add_message_type();
  counters_message->set_name("FixtureCounters");
  for (const counters::Counter<FixtureCounters>& c : kFixtureCounters) {
    gp::FieldDescriptorProto* fd = counters_message->add_field();
    fd->set_name(c.json);
    fd->set_number(c.number);
    fd->set_label(gp::FieldDescriptorProto::LABEL_OPTIONAL);
    fd->set_type(gp::FieldDescriptorProto::TYPE_UINT64);
  }
  gp::DescriptorProto* m = file.add_message_type();
  m->set_name("FixtureStats");
  for (const StatField<FixtureStats>& f : kFixtureFields) {
    gp::FieldDescriptorProto* fd = m->add_field();
    fd->set_name(f.name);
    fd->set_number(f.number);
    fd->set_label(gp::FieldDescriptorProto::LABEL_OPTIONAL);
    const std::string type =
        stats_internal::ProtoType(f.member.index(), stats_internal::SubMessage(f));
    if (type == "FixtureCounters") {
      fd->set_type(gp::FieldDescriptorProto::TYPE_MESSAGE);
      fd->set_type_name(".fixture.FixtureCounters");
    }
    if (type == "uint64") fd->set_type(gp::FieldDescriptorProto::TYPE_UINT64);
    if (type == "uint32") fd->set_type(gp::FieldDescriptorProto::TYPE_UINT32);
    if (type == "double") fd->set_type(gp::FieldDescriptorProto::TYPE_DOUBLE);
    if (type == "string") fd->set_type(gp::FieldDescriptorProto::TYPE_STRING);
    if (type == "map<string, uint64>") {
      gp::DescriptorProto* entry = m->add_nested_type();
      entry->set_name("DropsEntry");
      entry->mutable_options()->set_map_entry(true);
      for (auto [name, number, t] :
           {std::tuple{"key", 1, gp::FieldDescriptorProto::TYPE_STRING},
            std::tuple{"value", 2, gp::FieldDescriptorProto::TYPE_UINT64}}) {
        gp::FieldDescriptorProto* e = entry->add_field();
        e->set_name(name);
        e->set_number(number);
        e->set_label(gp::FieldDescriptorProto::LABEL_OPTIONAL);
        e->set_type(t);
      }
      fd->set_label(gp::FieldDescriptorProto::LABEL_REPEATED);
      fd->set_type(gp::FieldDescriptorProto::TYPE_MESSAGE);
      fd->set_type_name(".fixture.FixtureStats.DropsEntry");
    }
  }
  const gp::FileDescriptor* built = pool->BuildFile(file);
  return built == nullptr ? nullptr : built->FindMessageTypeByName("FixtureStats");
}

TEST(ControlStatsTest, AFigureAddedToAFixtureTableIsATypedProtoFieldTheConversionFills) {
  const std::string text = StatsMessageProto<FixtureStats>("FixtureStats", kFixtureFields);
  EXPECT_NE(text.find("  // The counter just added.\n  uint64 added_counter = 6;\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  map<string, uint64> drops = 5;\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  FixtureCounters counters = 7;\n"), std::string::npos) << text;
  std::map<std::string, std::string> counters_messages;
  CountersMessagesProto<FixtureStats>(kFixtureFields, &counters_messages);
  ASSERT_EQ(counters_messages.count("FixtureCounters"), 1u);
  EXPECT_NE(counters_messages["FixtureCounters"].find("  // Just added.\n  uint64 added = 2;\n"),
            std::string::npos)
      << counters_messages["FixtureCounters"];

  gp::DescriptorPool pool;
  const gp::Descriptor* d = DescribeFixture(&pool);
  ASSERT_NE(d, nullptr);
  ExpectTableIsMessage<FixtureStats>(kFixtureFields, d);
  gp::DynamicMessageFactory factory(&pool);
  std::unique_ptr<gp::Message> m(factory.GetPrototype(d)->New());

  FixtureStats s;
  FillAll<FixtureStats>(kFixtureFields, &s);
  stats_internal::FieldsToProto<FixtureStats>(kFixtureFields, s, m.get());
  const gp::Reflection* r = m->GetReflection();
  EXPECT_EQ(r->GetUInt64(*m, d->FindFieldByName("added_counter")), (uint64_t{6} << 40) + 7);
  EXPECT_EQ(r->GetUInt32(*m, d->FindFieldByName("port")), 302u);
  EXPECT_EQ(r->GetString(*m, d->FindFieldByName("mode")), "v4");
  EXPECT_EQ(r->FieldSize(*m, d->FindFieldByName("drops")), 2);
  const gp::Message& sub = r->GetMessage(*m, d->FindFieldByName("counters"));
  EXPECT_EQ(sub.GetReflection()->GetUInt64(sub, sub.GetDescriptor()->FindFieldByName("added")),
            (uint64_t{7} << 40) + (2 << 8) + 9);

  FixtureStats back;
  stats_internal::FieldsFromProto<FixtureStats>(kFixtureFields, *m, &back);
  EXPECT_EQ(back.added_counter, s.added_counter);
  EXPECT_EQ(back.ratio, s.ratio);
  EXPECT_EQ(back.port, s.port);
  EXPECT_EQ(back.drops, s.drops);
  EXPECT_EQ(back.counters.added, s.counters.added);
}

TEST(ControlStatsTest, AFieldWhoseProtoTypeDisagreesIsSkippedNotACrash) {
  // A table that calls field 4 (a string in the fixture message) a counter.
  constexpr StatField<FixtureStats> wrong[] = {
      {"mode", 4, &FixtureStats::packets, "Wrong type."},
      {"absent", 99, &FixtureStats::ratio, "No such field."},
  };
  gp::DescriptorPool pool;
  const gp::Descriptor* d = DescribeFixture(&pool);
  ASSERT_NE(d, nullptr);
  gp::DynamicMessageFactory factory(&pool);
  std::unique_ptr<gp::Message> m(factory.GetPrototype(d)->New());
  FixtureStats s;
  s.packets = 5;
  stats_internal::FieldsToProto<FixtureStats>(wrong, s, m.get());
  EXPECT_EQ(m->ByteSizeLong(), 0u);
  FixtureStats back;
  stats_internal::FieldsFromProto<FixtureStats>(wrong, *m, &back);
  EXPECT_EQ(back.packets, 0u);
}

}  // namespace
}  // namespace inca::control
