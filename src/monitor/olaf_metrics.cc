#include "monitor/olaf_metrics.h"

#include "monitor/prom_writer.h"
#include "monitor/str_cat.h"

namespace inca::monitor {

namespace {

using internal::JsonBool;
using internal::JsonNumber;
using internal::PromWriter;

std::string ClusterLabel(uint16_t c) {
  return internal::StrCat("cluster=\"", c, "\"");
}

}  // namespace

std::string RenderOlafPrometheus(const control::OlafStats& s) {
  const counters::OlafServerCounters& server = s.server;
  PromWriter w;
  WriteCounters<counters::HostCounters>(counters::kHostCounters, server, &w);
  WriteCounters<counters::OlafServerCounters>(counters::kOlafServerCounters, server, &w);
  WriteCounters<olaf::OlafCounters>(olaf::kOlafCounters, server.olaf, &w);
  w.Counter("inca_olaf_dropped_packets_total", "Packets dropped, by reason.");
  for (const auto& [reason, n] : s.drops) {
    w.Sample(internal::StrCat("reason=\"", reason, "\""), n);
  }
  w.Gauge("inca_olaf_queue_occupancy", "Updates queued now.");
  w.Sample("", s.occupancy);
  w.Gauge("inca_olaf_queue_depth", "Queue depth (entries).");
  w.Sample("", uint64_t{s.depth});
  w.Gauge("inca_olaf_queue_utilisation_ratio", "Occupancy over depth, as stamped into ACKs.");
  w.Sample("", s.queue_util);
  w.Gauge("inca_olaf_active_clusters", "Clusters counted as active (fair-share divisor).");
  w.Sample("", uint64_t{s.active_clusters});
  w.Gauge("inca_olaf_egress_rate_bits_per_second", "Paced rate of the PS-facing link.");
  w.Sample("", s.egress_rate_bps);
  w.Gauge("inca_olaf_conserved", "1 when every packet is accounted for.");
  w.Sample("", s.conserved && server.Conserved());
  for (const counters::Counter<olaf::QueueCounters>& f : olaf::kQueueCounters) {
    CounterFamily(f, "inca_olaf_cluster_", "", &w);
    for (const auto& c : s.clusters) w.Sample(ClusterLabel(c.cluster_id), c.queue.*f.field);
  }
  w.Counter("inca_olaf_cluster_dropped_total",
            "Updates of the cluster dropped on arrival or evicted from the queue.");
  for (const auto& c : s.clusters) w.Sample(ClusterLabel(c.cluster_id), c.dropped);
  w.Gauge("inca_olaf_cluster_workers", "Workers of the cluster the switch has learned.");
  for (const auto& c : s.clusters) w.Sample(ClusterLabel(c.cluster_id), uint64_t{c.workers});
  w.Gauge("inca_olaf_cluster_aom_seconds",
          "Age of Model at the switch's output: now minus the generation time of the "
          "cluster's freshest update sent toward the PS.");
  for (const auto& c : s.clusters) {
    if (c.aom_valid) w.Sample(ClusterLabel(c.cluster_id), c.aom_current_ms / 1e3);
  }
  w.Gauge("inca_olaf_cluster_aom_peak_seconds", "Largest peak AoM in the window.");
  for (const auto& c : s.clusters) {
    if (c.aom_valid) w.Sample(ClusterLabel(c.cluster_id), c.aom_peak_ms / 1e3);
  }
  w.Gauge("inca_olaf_cluster_aom_average_seconds", "Time-average AoM over the window.");
  for (const auto& c : s.clusters) {
    if (c.aom_valid) w.Sample(ClusterLabel(c.cluster_id), c.aom_average_ms / 1e3);
  }
  return w.Take();
}

std::string RenderOlafStatsJson(const control::OlafStats& s) {
  const counters::OlafServerCounters& server = s.server;
  std::string out = internal::StrCat(
      "{\"program\":\"", s.policy, "\",\"depth\":", s.depth, ",\"occupancy\":", s.occupancy,
      ",\"queue_util\":", JsonNumber(s.queue_util), ",\"active_clusters\":", s.active_clusters,
      ",\"egress_rate_bps\":", s.egress_rate_bps, ",\"delta_t_ms\":", JsonNumber(s.delta_t_ms),
      ",\"tau_ms\":", JsonNumber(s.tau_ms), ",\"updates_rx\":", server.olaf.updates_rx,
      ",\"updates_tx\":", server.olaf.updates_tx, ",\"passthrough\":", server.olaf.passthrough,
      ",\"dropped\":", s.dropped, ",\"conserved\":", JsonBool(s.conserved), ",\"clusters\":[");
  for (size_t i = 0; i < s.clusters.size(); ++i) {
    const auto& c = s.clusters[i];
    internal::StrAppend(&out, i ? "," : "", "{\"cluster\":", c.cluster_id,
                        ",\"workers\":", c.workers, ",",
                        counters::JsonFields<olaf::QueueCounters>(olaf::kQueueCounters, c.queue),
                        ",\"dropped\":", c.dropped);
    if (c.aom_valid) {
      internal::StrAppend(&out, ",\"aom_ms\":", JsonNumber(c.aom_current_ms),
                          ",\"aom_peak_ms\":", JsonNumber(c.aom_peak_ms),
                          ",\"aom_average_ms\":", JsonNumber(c.aom_average_ms));
    }
    out.append("}");
  }
  internal::StrAppend(&out, "],\"switch\":", server.ToJson(), "}");
  return out;
}

}  // namespace inca::monitor
