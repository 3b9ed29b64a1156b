#include "monitor/olaf_metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "monitor/json_check.h"
#include "monitor/prometheus_text_check.h"

namespace inca::monitor {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Optional;

control::OlafStats Sample() {
  control::OlafStats s;
  s.policy = "olaf";
  s.depth = 8;
  s.occupancy = 6;
  s.queue_util = 0.75;
  s.active_clusters = 3;
  s.egress_rate_bps = 40'000'000'000;
  s.server.olaf.updates_rx = 100;
  s.server.olaf.updates_tx = 60;
  s.server.olaf.passthrough = 2;
  s.drops["queue_full"] = 7;
  control::OlafClusterInfo a;
  a.cluster_id = 4;
  a.workers = 28;
  a.queue.offered = 50;
  a.queue.merged = 20;
  a.queue.dequeued = 30;
  a.queue.dequeued_worker_updates = 49;
  a.aom_valid = true;
  a.aom_current_ms = 12.5;
  a.aom_average_ms = 40;
  a.aom_peak_ms = 98;
  control::OlafClusterInfo b;  // nothing delivered yet: no AoM series
  b.cluster_id = 9;
  b.queue.offered = 3;
  s.clusters = {a, b};
  return s;
}

std::string Errors(const PromCheckResult& r) {
  std::string e;
  for (const auto& x : r.errors) e += x + "\n";
  return e;
}

TEST(RenderOlafPrometheus, IsValidAndExact) {
  control::OlafStats s = Sample();
  s.server.datagrams_rx = 5;
  s.server.program.rx_packets = 5;
  s.server.program.forwarded = 5;  // every packet accounted for
  const auto r = CheckPrometheusText(RenderOlafPrometheus(s));
  EXPECT_THAT(r.errors, IsEmpty()) << Errors(r);
  EXPECT_THAT(r.Value("inca_olaf_queue_utilisation_ratio"), Optional(0.75));
  EXPECT_THAT(r.Value("inca_olaf_dropped_packets_total{reason=\"queue_full\"}"), Optional(7.0));
  EXPECT_THAT(r.Value("inca_olaf_cluster_merged_total{cluster=\"4\"}"), Optional(20.0));
  EXPECT_THAT(r.Value("inca_olaf_cluster_dequeued_worker_updates_total{cluster=\"4\"}"),
              Optional(49.0));
  EXPECT_THAT(r.Value("inca_olaf_cluster_aom_average_seconds{cluster=\"4\"}"), Optional(0.04));
  EXPECT_THAT(r.Value("inca_olaf_cluster_offered_total{cluster=\"9\"}"), Optional(3.0));
  // No delivery yet: no AoM sample rather than a made-up 0.
  EXPECT_EQ(r.Value("inca_olaf_cluster_aom_seconds{cluster=\"9\"}"), std::nullopt);
  EXPECT_THAT(r.Value("inca_olaf_conserved"), Optional(1.0));
  EXPECT_EQ(r.Type("inca_olaf_cluster_aom_seconds"), "gauge");
  // The server's counters come with the control API's figures.
  EXPECT_THAT(r.Value("inca_switch_datagrams_received_total"), Optional(5.0));
  EXPECT_THAT(r.Value("inca_olaf_updates_received_total"), Optional(100.0));
}

TEST(RenderOlafPrometheus, ConservationFailureIsExported) {
  control::OlafStats s = Sample();
  s.server.datagrams_rx = 5;  // the program saw none of them
  const auto r = CheckPrometheusText(RenderOlafPrometheus(s));
  EXPECT_THAT(r.Value("inca_olaf_conserved"), Optional(0.0));
}

TEST(RenderOlafStatsJson, IsValidJsonWithEveryCluster) {
  const std::string j = RenderOlafStatsJson(Sample());
  EXPECT_EQ(CheckJson(j), "") << j;
  EXPECT_THAT(j, HasSubstr("\"cluster\":4,\"workers\":28"));
  EXPECT_THAT(j, HasSubstr("\"aom_average_ms\":40"));
  EXPECT_THAT(j, HasSubstr("\"cluster\":9,"));
}

}  // namespace
}  // namespace inca::monitor
