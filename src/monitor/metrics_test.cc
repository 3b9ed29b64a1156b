#include "monitor/metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "inca/control/reducer_stats.h"
#include "inca/wire/cais.h"
#include "monitor/json_check.h"
#include "monitor/prom_writer.h"
#include "monitor/prometheus_text_check.h"
#include "monitor/synthetic.h"

namespace inca::monitor {
namespace {

using ::testing::DoubleNear;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::Optional;

constexpr size_t R(dp::DropReason r) {
  return static_cast<size_t>(r);
}

// A snapshot with hand-picked figures in every section.
MetricsSnapshot Sample() {
  MetricsSnapshot s;
  s.taken_at = std::chrono::system_clock::time_point(std::chrono::milliseconds(1'700'000'000'250));
  auto& sw = s.switch_counters;
  sw.datagrams_rx = 1000;
  sw.mgmt_rx = 10;
  sw.reducer.rx_packets = 990;
  sw.reducer.aggregated = 900;
  sw.reducer.forwarded = 60;
  sw.reducer.dropped = 30;
  sw.reducer.drops_by_reason[R(dp::DropReason::kDuplicate)] = 20;
  sw.reducer.drops_by_reason[R(dp::DropReason::kChunkClosed)] = 10;
  sw.reducer.tx_packets = 500;
  sw.datagrams_tx = 500;
  sw.ports_bound = 4;
  sw.groups_formed = 2;
  sw.sram.sram_bytes = 1 << 20;
  sw.sram.cell_bytes = 1 << 14;
  sw.sram.cells_total = 64;
  sw.sram.cells_pending = 40;
  sw.sram.cells_retained = 16;
  sw.sram.pending_chunks = 40;
  sw.sram.max_pending_chunks = 128;
  sw.sram.usage_limit = 0.75;
  sw.cais.completed_chunks = 180;
  sw.cais.timeouts = 20;
  sw.cais.drops_by_reason[R(dp::DropReason::kChunkClosed)] = 10;
  sw.cais.sram_cells = 56;
  s.rates.reductions_per_s = 1.25e6;
  s.rates.reduced_bytes_per_s = 5e9;
  s.avg_pending_ms = 8.5;

  GroupMetrics g0;
  g0.group_id = 0;
  g0.counters.rx_packets = 700;
  g0.counters.completed_chunks = 170;
  g0.counters.holding_us_log2[10] = 170;  // all held [1024, 2048) us
  g0.counters.timeouts = 0;
  g0.counters.sram_cells = 50;
  g0.counters.drops_by_reason[R(dp::DropReason::kDuplicate)] = 20;
  g0.counters.dropped = 20;
  g0.slot_holding_avg_us = 2000;
  GroupMetrics g7;
  g7.group_id = 7;
  g7.counters.rx_packets = 290;
  g7.counters.completed_chunks = 10;
  g7.counters.timeouts = 20;
  g7.counters.drops_by_reason[R(dp::DropReason::kChunkClosed)] = 10;
  g7.counters.dropped = 10;
  g7.counters.sram_cells = 6;
  g7.offload_on = false;
  g7.offload_threshold = 0.4;
  s.groups = {g0, g7};
  return s;
}

std::string Errors(const PromCheckResult& r) {
  std::string all;
  for (const auto& e : r.errors) all += e + "\n";
  return all;
}

// --- counters declared once (util/counters.h) ---------------------------------

// A counter added to a fixture table turns up in Prometheus (with its kind
// and scale), in the JSON fields and in the docs rows.
struct FixtureCounters {
  uint64_t widgets = 0;
  uint64_t wait_ns = 0;
  uint64_t depth = 0;
};
constexpr counters::Counter<FixtureCounters> kFixture[] = {
    {1, "widgets", "inca_fixture_widgets_total", counters::Kind::kCounter, 1, "Widgets made.",
     &FixtureCounters::widgets},
    {2, "wait_ns", "inca_fixture_wait_seconds_total", counters::Kind::kCounter, 1e-9,
     "Time waited.", &FixtureCounters::wait_ns},
    {3, "depth", "inca_fixture_depth", counters::Kind::kGauge, 1, "Queue depth | now.",
     &FixtureCounters::depth},
};

TEST(DeclaredCounters, OneEntryReachesPrometheusJsonAndDocs) {
  const FixtureCounters v{7, 2'500'000'000, 3};
  internal::PromWriter w;
  internal::WriteCounters<FixtureCounters>(kFixture, v, &w);
  const auto r = CheckPrometheusText(w.Take());
  EXPECT_THAT(r.errors, IsEmpty()) << Errors(r);
  EXPECT_THAT(r.Value("inca_fixture_widgets_total"), Optional(7.0));
  EXPECT_EQ(r.Type("inca_fixture_widgets_total"), "counter");
  EXPECT_THAT(r.Value("inca_fixture_wait_seconds_total"), Optional(2.5));
  EXPECT_THAT(r.Value("inca_fixture_depth"), Optional(3.0));
  EXPECT_EQ(r.Type("inca_fixture_depth"), "gauge");
  const std::string json = counters::JsonFields<FixtureCounters>(kFixture, v);
  EXPECT_EQ(json, "\"widgets\":7,\"wait_ns\":2500000000,\"depth\":3");
  EXPECT_EQ(CheckJson("{" + json + "}"), "");
  EXPECT_EQ(counters::MarkdownRows<FixtureCounters>(kFixture),
            "| `inca_fixture_widgets_total` | counter | Widgets made. (JSON `widgets`) |\n"
            "| `inca_fixture_wait_seconds_total` | counter | Time waited. (JSON `wait_ns`) |\n"
            "| `inca_fixture_depth` | gauge | Queue depth \\| now. (JSON `depth`) |\n");
}

// --- the checker itself -----------------------------------------------------

TEST(PrometheusTextCheck, AcceptsWellFormedText) {
  const auto r = CheckPrometheusText(
      "# HELP inca_a_total A.\n# TYPE inca_a_total counter\ninca_a_total{x=\"1\",y=\"q\\\"\"} 3\n"
      "inca_a_total{x=\"2\"} 4\n# HELP inca_b B.\n# TYPE inca_b gauge\ninca_b -1.5e-3\n"
      "# HELP inca_c C.\n# TYPE inca_c gauge\ninca_c NaN\n");
  EXPECT_THAT(r.errors, IsEmpty()) << Errors(r);
  EXPECT_THAT(r.Value("inca_a_total{x=\"2\"}"), Optional(4.0));
  EXPECT_THAT(r.Value("inca_b"), Optional(-1.5e-3));
  EXPECT_EQ(r.Type("inca_b"), "gauge");
}

TEST(PrometheusTextCheck, RejectsEachKindOfMistake) {
  const char* bad[] = {
      "inca_a 1\n",                                                           // no HELP/TYPE
      "# HELP inca_a A.\ninca_a 1\n",                                         // no TYPE
      "# HELP inca_a A.\n# TYPE inca_a gauge\ninca_a 1",                      // no final newline
      "# HELP inca_a A.\n# TYPE inca_a gauge\ninca_a one\n",                  // not a number
      "# HELP inca_a A.\n# TYPE inca_a gauge\ninca_a 1\ninca_a 2\n",          // duplicate series
      "# HELP inca_a A.\n# TYPE inca_a counter\ninca_a 1\n",                  // counter not *_total
      "# HELP inca_a_total A.\n# TYPE inca_a_total gauge\ninca_a_total 1\n",  // gauge *_total
      "# HELP inca_a_total A.\n# TYPE inca_a_total counter\ninca_a_total -1\n",
      "# HELP inca_a A.\n# TYPE inca_a gauge\ninca_a{1x=\"a\"} 1\n",   // label name
      "# HELP inca_a A.\n# TYPE inca_a gauge\ninca_a{x=a} 1\n",        // unquoted
      "# HELP inca_a A.\n# TYPE inca_a gauge\ninca_a{x=\"\\t\"} 1\n",  // bad escape
      "# HELP inca_a A.\n# TYPE inca_a gauge\ninca_a{x=\"a\",x=\"b\"} 1\n",
      "# HELP inca_a A.\n# TYPE inca_a gauge\ninca_a 1 1700000000\n",  // timestamp
      "# HELP inca_a A.\n# TYPE inca_a summary\ninca_a 1\n",
      "# HELP other A.\n# TYPE other gauge\nother 1\n",       // prefix
      "# HELP inca_a A.\n# TYPE inca_a gauge\n\ninca_a 1\n",  // blank line
      ("# HELP inca_a A.\n# TYPE inca_a gauge\ninca_a{x=\"1\"} 1\n# HELP inca_b B.\n"
       "# TYPE inca_b gauge\ninca_b 1\ninca_a{x=\"2\"} 1\n"),  // not contiguous
  };
  for (const char* text : bad) {
    EXPECT_THAT(CheckPrometheusText(text).errors, Not(IsEmpty())) << text;
  }
}

// --- RenderPrometheus -----------------------------------------------------------

TEST(RenderPrometheus, EmptySnapshotIsValid) {
  const auto r = CheckPrometheusText(RenderPrometheus(MetricsSnapshot{}));
  EXPECT_THAT(r.errors, IsEmpty()) << Errors(r);
  EXPECT_THAT(r.Value("inca_cais_fallback_ratio"), Optional(0.0));
  EXPECT_THAT(r.Value("inca_sram_usage_ratio"), Optional(0.0));
}

TEST(RenderPrometheus, SampleSnapshotIsValidAndExact) {
  const std::string text = RenderPrometheus(Sample());
  const auto r = CheckPrometheusText(text);
  ASSERT_THAT(r.errors, IsEmpty()) << Errors(r) << text;

  EXPECT_THAT(r.Value("inca_monitor_snapshot_timestamp_seconds"), Optional(1'700'000'000.25));
  EXPECT_THAT(r.Value("inca_switch_datagrams_received_total"), Optional(1000.0));
  EXPECT_THAT(r.Value("inca_switch_ports_bound"), Optional(4.0));
  EXPECT_THAT(r.Value("inca_switch_conserved"), Optional(1.0));
  EXPECT_THAT(r.Value("inca_reducer_received_packets_total"), Optional(990.0));
  EXPECT_THAT(r.Value("inca_reducer_dropped_packets_total{reason=\"duplicate\"}"), Optional(20.0));
  EXPECT_THAT(r.Value("inca_reducer_dropped_packets_total{reason=\"chunk_closed\"}"),
              Optional(10.0));
  EXPECT_THAT(r.Value("inca_reducer_dropped_packets_total{reason=\"no_rule\"}"), Optional(0.0));
  EXPECT_FALSE(r.Value("inca_reducer_dropped_packets_total{reason=\"none\"}"));

  EXPECT_THAT(r.Value("inca_cais_completed_chunks_total"), Optional(180.0));
  EXPECT_THAT(r.Value("inca_cais_group_completed_chunks_total{group=\"0\"}"), Optional(170.0));
  EXPECT_THAT(r.Value("inca_cais_group_completed_chunks_total{group=\"7\"}"), Optional(10.0));
  EXPECT_THAT(r.Value("inca_cais_group_received_packets_total{group=\"7\"}"), Optional(290.0));
  EXPECT_THAT(r.Value("inca_cais_group_dropped_packets_total{group=\"0\",reason=\"duplicate\"}"),
              Optional(20.0));
  EXPECT_THAT(r.Value("inca_cais_group_dropped_packets_total{group=\"7\",reason=\"chunk_closed\"}"),
              Optional(10.0));
  EXPECT_FALSE(r.Value("inca_cais_group_dropped_packets_total{group=\"0\",reason=\"no_rule\"}"));
  EXPECT_THAT(r.Value("inca_cais_group_sram_bytes{group=\"0\"}"), Optional(50.0 * 16384));
  EXPECT_THAT(r.Value("inca_cais_sram_bytes"), Optional(56.0 * 16384));

  // (20 + 10) / (180 + 20) = 0.15 switch-wide; group 7: (20 + 10) / 30 = 1.
  EXPECT_THAT(r.Value("inca_cais_fallback_ratio"), Optional(0.15));
  EXPECT_THAT(r.Value("inca_cais_fallback_alarm"), Optional(1.0));
  EXPECT_THAT(r.Value("inca_cais_group_fallback_ratio{group=\"0\"}"), Optional(0.0));
  EXPECT_THAT(r.Value("inca_cais_group_fallback_ratio{group=\"7\"}"), Optional(1.0));
  EXPECT_THAT(r.Value("inca_cais_avg_pending_seconds"), Optional(0.0085));
  EXPECT_THAT(r.Value("inca_cais_group_avg_pending_seconds{group=\"0\"}"), Optional(0.002));
  EXPECT_THAT(r.Value("inca_cais_group_slot_holding_p50_seconds{group=\"0\"}"), Optional(0.001536));
  EXPECT_THAT(r.Value("inca_cais_group_slot_holding_p99_seconds{group=\"0\"}"),
              Optional(DoubleNear(0.00203776, 1e-9)));
  EXPECT_THAT(r.Value("inca_cais_reductions_per_second"), Optional(1.25e6));
  EXPECT_THAT(r.Value("inca_cais_reduced_bytes_per_second"), Optional(5e9));

  EXPECT_THAT(r.Value("inca_cais_groups_active"), Optional(2.0));
  EXPECT_THAT(r.Value("inca_cais_group_offload_enabled{group=\"0\"}"), Optional(1.0));
  EXPECT_THAT(r.Value("inca_cais_group_offload_enabled{group=\"7\"}"), Optional(0.0));
  EXPECT_THAT(r.Value("inca_cais_group_offload_threshold{group=\"0\"}"), Optional(0.2));
  EXPECT_THAT(r.Value("inca_cais_group_offload_threshold{group=\"7\"}"), Optional(0.4));

  EXPECT_THAT(r.Value("inca_sram_capacity_bytes"), Optional(1048576.0));
  EXPECT_THAT(r.Value("inca_sram_used_bytes{state=\"pending\"}"), Optional(40.0 * 16384));
  EXPECT_THAT(r.Value("inca_sram_used_bytes{state=\"retained\"}"), Optional(16.0 * 16384));
  EXPECT_THAT(r.Value("inca_sram_usage_ratio"), Optional(0.875));
  EXPECT_THAT(r.Value("inca_sram_pending_usage_ratio"), Optional(0.625));
  EXPECT_THAT(r.Value("inca_sram_usage_limit_ratio"), Optional(0.75));
  EXPECT_THAT(r.Value("inca_sram_pressure_ratio"), Optional(DoubleNear(0.625 / 0.75, 1e-12)));
  EXPECT_THAT(r.Value("inca_sram_pressure"), Optional(1.0));
  EXPECT_THAT(r.Value("inca_sram_max_pending_chunks"), Optional(128.0));

  EXPECT_EQ(r.Type("inca_cais_group_timeouts_total"), "counter");
  EXPECT_EQ(r.Type("inca_sram_usage_ratio"), "gauge");
}

// Issue 18: after a job, retained results held usage at 1.0 and the
// dashboard showed SRAM PRESSURE while the controller (pending against the
// admission limit) saw 4 %. Pressure is now that one figure everywhere.
TEST(RenderPrometheus, PressureIsPendingAgainstTheLimitNotRetainedResults) {
  MetricsSnapshot s = Sample();
  cais::SramUsage& sram = s.switch_counters.sram;
  sram.cells_pending = 2;
  sram.cells_retained = 62;  // usage 1.0
  const auto r = CheckPrometheusText(RenderPrometheus(s));
  EXPECT_THAT(r.Value("inca_sram_usage_ratio"), Optional(1.0));
  EXPECT_THAT(r.Value("inca_sram_pressure_ratio"), Optional(DoubleNear(2.0 / 64 / 0.75, 1e-12)));
  EXPECT_THAT(r.Value("inca_sram_pressure"), Optional(0.0));
  EXPECT_NE(RenderStatsJson(s).find("\"pressure\":false"), std::string::npos);
  EXPECT_DOUBLE_EQ(sram.pressure(), cais::SramPressure(sram.pending_usage(), 0.75, 1.0));
}

// Issue 17: the alarm is the offload controller's, over its 10 s window,
// when one runs; the since-start ratio stays a gauge of its own.
TEST(RenderPrometheus, TheFallbackAlarmFollowsTheControllersWindowWhenOneRuns) {
  MetricsSnapshot s = Sample();  // since start: 0.15, which alone raises the alarm
  EXPECT_TRUE(FallbackAlarm(s));
  control::OffloadPolicy p;
  p.controller = "embedded";
  p.updated_unix_ms = 1;
  p.fallback_ratio = 0.02;
  p.fallback_alarm = false;
  control::GroupOffload held;
  held.group_id = 7;
  held.min_bytes = 1;
  held.max_bytes = 0;
  held.fallback_ratio = 0.5;
  held.fallback_hold = true;
  p.groups.push_back(held);
  ApplyOffloadPolicy(p, &s);
  const auto r = CheckPrometheusText(RenderPrometheus(s));
  EXPECT_THAT(r.errors, IsEmpty()) << Errors(r);
  EXPECT_THAT(r.Value("inca_cais_fallback_ratio"), Optional(0.15));
  EXPECT_THAT(r.Value("inca_cais_fallback_alarm"), Optional(0.0));
  EXPECT_THAT(r.Value("inca_offload_fallback_ratio"), Optional(0.02));
  EXPECT_THAT(r.Value("inca_cais_group_fallback_hold{group=\"7\"}"), Optional(1.0));
  EXPECT_THAT(r.Value("inca_cais_group_fallback_hold{group=\"0\"}"), Optional(0.0));
  const std::string json = RenderStatsJson(s);
  EXPECT_EQ(CheckJson(json), "") << json;
  EXPECT_THAT(json, HasSubstr("\"fallback_ratio_window\":0.02,\"fallback_alarm\":false"));
  EXPECT_THAT(json, HasSubstr("\"fallback_hold\":true"));
  // The controller's alarm raised: the gauge follows it.
  p.fallback_alarm = true;
  ApplyOffloadPolicy(p, &s);
  EXPECT_THAT(CheckPrometheusText(RenderPrometheus(s)).Value("inca_cais_fallback_alarm"),
              Optional(1.0));
}

// Issue 17: "queue delay" is the write-up's, in the switch and in us (kernel
// receive timestamp to the pipeline); slot holding is its own figure.
TEST(RenderPrometheus, QueueDelayIsTheSwitchsOwnAndSlotHoldingApart) {
  MetricsSnapshot s = Sample();
  s.switch_counters.ingress_delay_ns_total = 1000 * 50'000;  // 1,000 datagrams of 50 us
  s.switch_counters.ingress_delay_samples = 1000;
  const auto r = CheckPrometheusText(RenderPrometheus(s));
  EXPECT_THAT(r.errors, IsEmpty()) << Errors(r);
  EXPECT_THAT(r.Value("inca_switch_queue_delay_seconds"), Optional(DoubleNear(50e-6, 1e-15)));
  EXPECT_THAT(r.Value("inca_switch_queue_delay_seconds_total"), Optional(0.05));
  EXPECT_THAT(r.Value("inca_switch_queue_delay_samples_total"), Optional(1000.0));
  EXPECT_THAT(r.Value("inca_cais_avg_pending_seconds"), Optional(0.0085));  // slot holding
  EXPECT_THAT(RenderStatsJson(s), HasSubstr("\"queue_delay_us\":50,"));
  EXPECT_DOUBLE_EQ(QueueDelayUs(counters::SwitchCounters{}), 0.0);
}

TEST(RenderPrometheus, EveryDropReasonHasASeries) {
  const auto r = CheckPrometheusText(RenderPrometheus(Sample()));
  for (size_t i = 1; i < dp::kDropReasonCount; ++i) {
    const auto reason = dp::ToString(static_cast<dp::DropReason>(i));
    EXPECT_TRUE(r.Value(std::string("inca_reducer_dropped_packets_total{reason=\"") +
                        std::string(reason) + "\"}"))
        << reason;
  }
}

TEST(RenderPrometheus, NonFiniteGaugesUsePrometheusSpelling) {
  MetricsSnapshot s;
  s.avg_pending_ms = std::numeric_limits<double>::quiet_NaN();
  s.rates.reductions_per_s = std::numeric_limits<double>::infinity();
  const std::string text = RenderPrometheus(s);
  const auto r = CheckPrometheusText(text);
  EXPECT_THAT(r.errors, IsEmpty()) << Errors(r);
  EXPECT_THAT(text, HasSubstr("\ninca_cais_avg_pending_seconds NaN\n"));
  EXPECT_THAT(text, HasSubstr("\ninca_cais_reductions_per_second +Inf\n"));
}

// --- FallbackRatio ------------------------------------------------------------

TEST(FallbackRatio, FollowsTheDocumentedFormula) {
  cais::GroupCounters c;
  EXPECT_EQ(FallbackRatio(c), 0);  // nothing finished
  c.completed_chunks = 90;
  EXPECT_EQ(FallbackRatio(c), 0);
  c.timeouts = 10;
  EXPECT_DOUBLE_EQ(FallbackRatio(c), 0.1);  // 10 / 100
  c.drops_by_reason[R(dp::DropReason::kChunkClosed)] = 5;
  EXPECT_DOUBLE_EQ(FallbackRatio(c), 0.15);                 // 15 / 100
  c.drops_by_reason[R(dp::DropReason::kDuplicate)] = 1000;  // other drops do not count
  EXPECT_DOUBLE_EQ(FallbackRatio(c), 0.15);
  cais::GroupCounters late;
  late.timeouts = 1;
  late.drops_by_reason[R(dp::DropReason::kChunkClosed)] = 9;
  EXPECT_EQ(FallbackRatio(late), 1.0);  // capped
}

// --- FromControl: what GetStats reports of a real reducer -----------------------

struct NullSink final : dp::PacketSink {
  size_t emitted = 0;
  void Emit(dp::PortId, std::span<const uint8_t>) override { ++emitted; }
};

// Chunk `chunk` of 4 of an f32 sum all-reduce of group `group`, 16 bytes.
std::vector<uint8_t> ChunkPacket(uint8_t group, uint16_t chunk) {
  wire::CaisHeader h;
  h.op = wire::CaisOp::kAllReduce;
  h.reduce_op = wire::ReduceOp::kSum;
  h.dtype = wire::DType::kF32;
  h.group_id = group;
  h.layer_id = 1;
  h.chunk_id = chunk;
  h.total_chunks = 4;
  h.payload_len = 16;
  std::vector<uint8_t> p(wire::kCaisHeaderBytes + 16, 0);
  wire::SerializeCaisHeader(h, p);
  return p;
}

// A reducer with group 3 on ports 1 and 2.
std::unique_ptr<cais::CaisReducer> GroupThreeReducer() {
  auto reducer = cais::CaisReducer::Create(cais::CaisConfig{});
  EXPECT_TRUE(reducer.ok()) << reducer.status();
  EXPECT_TRUE((*reducer)
                  ->rules()
                  .Add(cais::Rule{cais::RuleKey{3, std::nullopt, std::nullopt},
                                  {1, 2},
                                  {1, 2},
                                  wire::CaisOp::kAllReduce})
                  .ok());
  return std::move(*reducer);
}

// What SwitchControl::GetStats puts together for one reducer.
control::Stats StatsOf(const cais::CaisReducer& red) {
  control::Stats st;
  control::CollectReducerStats(red, &st);
  st.counters.cais = red.totals();
  st.counters.sram = red.sram();
  st.counters.reducer = red.counters();
  st.counters.datagrams_rx = red.counters().rx_packets;
  st.counters.datagrams_tx = red.counters().tx_packets;
  return st;
}

TEST(FromControl, ShowsTheGroupsTheControlApiReports) {
  const std::unique_ptr<cais::CaisReducer> reducer = GroupThreeReducer();
  cais::CaisReducer& red = *reducer;
  NullSink sink;
  auto packet = ChunkPacket;
  for (uint16_t chunk = 0; chunk < 3; ++chunk) {
    red.Process(packet(3, chunk), 1, 1000, sink);
    red.Process(packet(3, chunk), 2, 1000, sink);
  }
  red.Process(packet(3, 3), 1, 1000, sink);  // pending: holds SRAM
  red.Process(packet(9, 0), 1, 1000, sink);  // no rule for group 9: dropped
  ASSERT_EQ(red.group(3).completed_chunks, 3u);

  const control::Stats st = StatsOf(red);
  MetricsSnapshot s = FromControl(st, control::OffloadPolicy{}, {});
  ASSERT_EQ(s.groups.size(), 2u);
  EXPECT_EQ(s.groups[0].group_id, 3);
  EXPECT_EQ(s.groups[0].counters.completed_chunks, 3u);
  EXPECT_EQ(s.groups[0].counters.contributions, 7u);
  EXPECT_GT(s.groups[0].counters.sram_cells, 0u);
  EXPECT_TRUE(s.groups[0].offload_on);
  EXPECT_TRUE(s.groups[0].active);
  EXPECT_EQ(s.groups[0].counters.offload_accepted_ops, 1u);  // no policy: accepted, once
  EXPECT_EQ(s.groups[0].offload_threshold, kDefaultOffloadThreshold);
  EXPECT_EQ(s.groups[1].group_id, 9);
  // Issue 18: a group with no rule (dissolved) is not shown as offloaded.
  EXPECT_FALSE(s.groups[1].active);
  EXPECT_FALSE(s.groups[1].offload_on);
  EXPECT_EQ(s.groups[1].counters.drops_by_reason[R(dp::DropReason::kNoRule)], 1u);

  const auto r = CheckPrometheusText(RenderPrometheus(s));
  EXPECT_THAT(r.errors, IsEmpty()) << Errors(r);
  EXPECT_THAT(r.Value("inca_cais_group_completed_chunks_total{group=\"3\"}"), Optional(3.0));
  EXPECT_THAT(r.Value("inca_cais_group_dropped_packets_total{group=\"9\",reason=\"no_rule\"}"),
              Optional(1.0));
  // Group 3 holds one pending chunk of its reserved share (issue 18).
  EXPECT_THAT(r.Value("inca_cais_group_pending_chunks{group=\"3\"}"), Optional(1.0));
  EXPECT_THAT(r.Value("inca_cais_group_share_chunks{group=\"3\"}"),
              Optional(static_cast<double>(red.share(3).share_chunks)));
  EXPECT_GT(red.share(3).share_chunks, 0u);
  EXPECT_THAT(r.Value("inca_cais_group_share_chunks{group=\"9\"}"), Optional(0.0));
}

// A tree (docs/design/tree.md): a group that goes up from this switch shows
// its uplink port and the partials it sent up; a root's group shows none.
TEST(FromControl, AGroupGoingUpATreeShowsItsUplinkAndPartials) {
  const std::unique_ptr<cais::CaisReducer> reducer = GroupThreeReducer();
  cais::CaisReducer& red = *reducer;
  cais::Rule up{
      cais::RuleKey{5, std::nullopt, std::nullopt}, {1, 2}, {1, 2}, wire::CaisOp::kAllReduce};
  up.uplink = 7;
  ASSERT_TRUE(red.rules().Add(up).ok());
  NullSink sink;
  red.Process(ChunkPacket(5, 0), 1, 1000, sink);
  red.Process(ChunkPacket(5, 0), 2, 1000, sink);  // complete here: the partial goes up
  red.Process(ChunkPacket(3, 0), 1, 1000, sink);
  ASSERT_EQ(red.group(5).uplink_partials, 1u);

  const control::Stats st = StatsOf(red);
  MetricsSnapshot s = FromControl(st, control::OffloadPolicy{}, {});
  const auto r = CheckPrometheusText(RenderPrometheus(s));
  EXPECT_THAT(r.errors, IsEmpty()) << Errors(r);
  EXPECT_THAT(r.Value("inca_cais_group_uplink_port{group=\"5\"}"), Optional(7.0));
  EXPECT_THAT(r.Value("inca_cais_group_uplink_partials_total{group=\"5\"}"), Optional(1.0));
  EXPECT_EQ(r.Value("inca_cais_group_uplink_port{group=\"3\"}"), std::nullopt) << "not a tree";
}

// inca-switchd --threads 2: two reducers' figures summed exactly (the
// slot-holding histograms add), each shard listed and in /metrics.
TEST(FromControl, ShardsAreSummedAndEachIsShown) {
  const std::unique_ptr<cais::CaisReducer> a = GroupThreeReducer(), b = GroupThreeReducer();
  NullSink sink;
  for (uint16_t chunk = 0; chunk < 2; ++chunk) {  // shard 0: chunks 0, 1 at 1 us and 3 us
    a->Process(ChunkPacket(3, chunk), 1, 1000, sink);
    a->Process(ChunkPacket(3, chunk), 2, 2000 + 2000 * chunk, sink);
  }
  b->Process(ChunkPacket(3, 2), 1, 1000, sink);  // shard 1: chunk 2 at 1 ms, chunk 3 pending
  b->Process(ChunkPacket(3, 2), 2, 1'001'000, sink);
  b->Process(ChunkPacket(3, 3), 1, 1000, sink);
  b->Process(ChunkPacket(9, 0), 1, 1000, sink);  // no rule: dropped
  const control::Stats parts[] = {StatsOf(*a), StatsOf(*b)};
  const std::string endpoints[] = {"127.0.0.1:9410", "127.0.0.1:9411"};
  const control::Stats st = control::MergeShards(parts, endpoints);

  EXPECT_EQ(st.counters.cais.completed_chunks, 3u);
  EXPECT_EQ(st.counters.datagrams_rx, 8u);
  EXPECT_EQ(st.sram_bytes, 2 * parts[0].sram_bytes);
  EXPECT_DOUBLE_EQ(st.sram_usage, (parts[0].sram_usage + parts[1].sram_usage) / 2);
  EXPECT_TRUE(st.conserved);
  EXPECT_EQ(st.drops.at("no_rule"), 1u);
  // p99 of {1 us, 3 us, 1 ms} is in the 1 ms bucket: only shard 1 has it.
  EXPECT_GT(st.slot_holding_p99_us, 500.0);
  EXPECT_LT(parts[0].slot_holding_p99_us, 10.0);
  ASSERT_EQ(st.groups.size(), 2u);
  EXPECT_EQ(st.groups[0].group_id, 3);
  EXPECT_EQ(st.groups[0].counters.completed_chunks, 3u);
  EXPECT_EQ(st.groups[0].counters.contributions, 7u);
  EXPECT_EQ(st.groups[0].pending_chunks, 1u);
  EXPECT_EQ(st.groups[1].group_id, 9);
  ASSERT_EQ(st.shards.size(), 2u);
  EXPECT_EQ(st.shards[1].endpoint, "127.0.0.1:9411");
  EXPECT_EQ(st.shards[1].counters.cais.completed_chunks, 1u);
  EXPECT_TRUE(st.shards[1].conserved);
  // One part is passed through as it is.
  EXPECT_TRUE(control::MergeShards({parts, 1}, {endpoints, 1}).shards.empty());

  const MetricsSnapshot s = FromControl(st, control::OffloadPolicy{}, {});
  const auto r = CheckPrometheusText(RenderPrometheus(s));
  EXPECT_THAT(r.errors, IsEmpty()) << Errors(r);
  EXPECT_THAT(r.Value("inca_cais_completed_chunks_total"), Optional(3.0));
  EXPECT_THAT(r.Value("inca_shard_cais_completed_chunks_total{shard=\"0\"}"), Optional(2.0));
  EXPECT_THAT(r.Value("inca_shard_cais_completed_chunks_total{shard=\"1\"}"), Optional(1.0));
  EXPECT_THAT(r.Value("inca_shard_switch_datagrams_received_total{shard=\"1\"}"), Optional(4.0));
  EXPECT_THAT(r.Value("inca_shard_conserved{shard=\"1\"}"), Optional(1.0));
  const std::string json = RenderStatsJson(s);
  EXPECT_EQ(CheckJson(json), "") << json;
  EXPECT_THAT(json, HasSubstr("\"shards\":[{\"shard\":0,\"endpoint\":\"127.0.0.1:9410\""));
}

// --- RenderStatsJson ------------------------------------------------------------

TEST(RenderStatsJson, IsValidJsonWithTheDashboardFields) {
  const std::string json = RenderStatsJson(Sample());
  EXPECT_EQ(CheckJson(json), "") << json;
  for (const char* key :
       {"\"time_ms\":1700000000250", "\"usage_ratio\":0.875", "\"reductions_per_s\":1250000",
        "\"avg_pending_ms\":8.5", "\"fallback_ratio\":0.15", "\"fallback_alarm\":true",
        "\"group\":7,\"offload_on\":false,\"offload_threshold\":0.4", "\"chunk_closed\":10",
        "\"drops\":{\"duplicate\":20}", "\"switch\":{\"datagrams_rx\":1000",
        "\"fallback_alarm_ratio\":0.1", "\"fallback_ratio_window\":null"}) {
    EXPECT_THAT(json, HasSubstr(key));
  }
}

TEST(RenderStatsJson, NonFiniteNumbersBecomeNull) {
  MetricsSnapshot s;
  s.avg_pending_ms = std::numeric_limits<double>::quiet_NaN();
  const std::string json = RenderStatsJson(s);
  EXPECT_EQ(CheckJson(json), "") << json;
  EXPECT_THAT(json, HasSubstr("\"avg_pending_ms\":null"));
  EXPECT_THAT(json, HasSubstr("\"groups\":[]"));
}

TEST(JsonCheck, RejectsMalformedJson) {
  EXPECT_EQ(CheckJson("{\"a\":[1,2.5e3,true,null,\"x\\\"\"]}"), "");
  for (const char* bad : {"", "{", "{\"a\":}", "{\"a\":1,}", "[1 2]", "{\"a\":NaN}", "{a:1}",
                          "{\"a\":1} x", "{\"a\":01}"}) {
    EXPECT_NE(CheckJson(bad), "") << bad;
  }
}

// --- the synthetic source used by the dashboard demo --------------------------

TEST(SyntheticMetrics, EverySnapshotIsValidConservedAndMoving) {
  SyntheticMetrics synth;
  double last_completed = -1;
  std::set<double> usages;
  for (int i = 0; i < 30; ++i) {
    const MetricsSnapshot s = synth.Next();
    EXPECT_TRUE(s.switch_counters.Conserved()) << i;
    EXPECT_TRUE(s.switch_counters.reducer.Conserved()) << i;
    const auto r = CheckPrometheusText(RenderPrometheus(s));
    ASSERT_THAT(r.errors, IsEmpty()) << Errors(r);
    EXPECT_EQ(CheckJson(RenderStatsJson(s)), "");
    const double completed = *r.Value("inca_cais_completed_chunks_total");
    EXPECT_GT(completed, last_completed);
    last_completed = completed;
    usages.insert(s.switch_counters.sram.usage());
    EXPECT_GE(s.groups.size(), 2u);
  }
  EXPECT_GT(usages.size(), 10u);
}

}  // namespace
}  // namespace inca::monitor
