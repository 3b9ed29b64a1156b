// The OLAF switch program (seed 000, sections 2.3, 3.1 and 3.3) as a pure
// data-plane Program: parse -> stamp (Worker_ID, Cluster_ID) -> queue
// (OLAF or FIFO policy) -> paced egress toward the PS; on the reverse path
// ACKs are stamped with this switch's queue state and routed to the worker,
// MODEL packets are multicast to the ports of the cluster's workers.
//
// Stage contracts:
//  ingress  ports >= dp::kMaxPorts are dropped (bad_ingress_port). Bytes not
//           starting with the OLAF magic are passed through untouched (see
//           SetPassthroughRoute). Malformed OLAF packets are dropped with
//           the parse error as reason.
//  UPDATE   (from a non-PS port) worker_id 0 is stamped with WorkerIdOf(the
//           flow bound to the ingress port); cluster_id is taken from the
//           cluster table (key: that flow's UDP source port), else kept from
//           the header, else the update is dropped (unknown_cluster). The
//           worker table learns worker_id -> (port, cluster). The update is
//           offered to the queue: verdict kAggregated when queued or merged,
//           kForwarded when it went straight out (link idle, queue empty).
//  egress   the PS-facing link sends at egress_rate_bps; an update of B bytes
//           holds it for (B + egress_overhead_bytes)·8/rate seconds. Advance()
//           sends whatever can start by `now`; NextWakeNs() says when to call
//           it next. Rate 0 = unpaced.
//  ACK      (from ps_port) queue_util = max(ACK's, this switch's); when this
//           switch's is larger, active_clusters is replaced with its own too
//           (the most congested switch on the path wins). Routed to the
//           worker's learned port (unknown_worker otherwise).
//  MODEL    (from ps_port) one copy, byte-identical, per distinct port with
//           workers of the cluster (0xFFFF: every port with workers), in
//           ascending port order; no_route when there is none.
// Every packet gets one Verdict; a drop's dp::DropReason (the one enum every
// program shares) is also counted in OlafCounters::drops.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "inca/dataplane/program.h"
#include "inca/olaf/aom_tracker.h"
#include "inca/olaf/cluster_table.h"
#include "inca/olaf/ps_clock.h"
#include "inca/olaf/update_queue.h"
#include "inca/olaf/worker_id.h"
#include "inca/util/counters.h"
#include "inca/wire/olaf.h"

namespace inca::olaf {

// The drop reason for a parse error (e != kOk, kNotOlaf).
dp::DropReason FromParseError(OlafParseError e);

struct OlafSwitchConfig {
  QueuePolicy policy = QueuePolicy::kOlaf;
  uint32_t depth = 8;
  dp::TimeNs delta_t_ns = 400 * dp::kNsPerMs;
  dp::TimeNs tau_ns = 100 * dp::kNsPerMs;
  uint32_t max_payload_bytes = 8952;
  // PS-facing link: rate (0 = unpaced) and per-packet bytes added on the
  // wire to the UDP payload (default: Ethernet 14 + FCS 4 + preamble 8 +
  // IFG 12, IPv4 20, UDP 8).
  uint64_t egress_rate_bps = 40'000'000'000;
  uint32_t egress_overhead_bytes = 66;
  dp::PortId ps_port = 0;
  uint32_t max_workers = 1024;
  uint32_t max_clusters = 64;
  size_t cluster_table_capacity = ClusterTable::kDefaultCapacity;

  absl::Status Validate() const;
  QueueConfig queue() const;
};

struct OlafCounters {
  uint64_t updates_rx = 0;           // UPDATE packets that parsed
  uint64_t updates_absorbed = 0;     // queued or merged (verdict kAggregated)
  uint64_t updates_cut_through = 0;  // sent at once (verdict kForwarded)
  uint64_t updates_tx = 0;           // UPDATE packets sent to ps_port
  uint64_t acks_forwarded = 0;
  uint64_t acks_restamped = 0;  // ACKs whose queue state this switch replaced
  uint64_t models_rx = 0;
  uint64_t model_copies_tx = 0;
  uint64_t passthrough = 0;  // non-OLAF packets forwarded untouched
  uint64_t dropped = 0;
  std::array<uint64_t, dp::kDropReasonCount> drops{};  // by dp::DropReason
  uint64_t drops_of(dp::DropReason r) const { return drops[static_cast<size_t>(r)]; }
};

// OlafCounters' counters, declared once (inca/util/counters.h): the stop
// line's JSON, /metrics and docs/monitoring.md's rows come from this table
// (drops, by reason, are written by hand).
inline constexpr counters::Counter<OlafCounters> kOlafCounters[] = {
    {1, "updates_rx", "inca_olaf_updates_received_total", counters::Kind::kCounter, 1,
     "UPDATE packets that parsed.", &OlafCounters::updates_rx},
    {2, "updates_absorbed", "inca_olaf_updates_absorbed_total", counters::Kind::kCounter, 1,
     "UPDATEs queued or merged into a queued one.", &OlafCounters::updates_absorbed},
    {3, "updates_cut_through", "inca_olaf_updates_cut_through_total", counters::Kind::kCounter, 1,
     "UPDATEs sent on at once (the queue was empty and the link free).",
     &OlafCounters::updates_cut_through},
    {4, "updates_tx", "inca_olaf_updates_sent_total", counters::Kind::kCounter, 1,
     "UPDATE packets sent toward the PS.", &OlafCounters::updates_tx},
    {5, "acks_forwarded", "inca_olaf_acks_forwarded_total", counters::Kind::kCounter, 1,
     "ACKs stamped and forwarded to workers.", &OlafCounters::acks_forwarded},
    {6, "acks_restamped", "inca_olaf_acks_restamped_total", counters::Kind::kCounter, 1,
     "ACKs whose queue state this switch replaced.", &OlafCounters::acks_restamped},
    {7, "models_rx", "inca_olaf_models_received_total", counters::Kind::kCounter, 1,
     "MODEL packets from the PS.", &OlafCounters::models_rx},
    {8, "model_copies_tx", "inca_olaf_model_copies_sent_total", counters::Kind::kCounter, 1,
     "MODEL copies multicast to workers.", &OlafCounters::model_copies_tx},
    {9, "passthrough", "inca_olaf_passthrough_total", counters::Kind::kCounter, 1,
     "Non-OLAF packets forwarded untouched.", &OlafCounters::passthrough},
};

// Where a learned worker lives.
struct WorkerRoute {
  dp::PortId port = 0;
  uint16_t cluster_id = 0;
};

// Everything known about one cluster at this switch (for metrics and the
// simulator's outputs).
struct OlafClusterStats {
  uint16_t cluster_id = 0;
  QueueCounters queue;          // offered/enqueued/merged/dequeued/drops/occupancy
  std::optional<AomStats> aom;  // at this switch's PS-facing output
  uint32_t workers = 0;         // learned workers of this cluster
};

struct OlafQueueState {
  uint64_t occupancy = 0;
  uint32_t depth = 0;
  uint32_t queue_util = 0;  // 24-bit fixed point, as stamped into ACKs
  uint32_t active_clusters = 0;
  dp::TimeNs link_free_ns = 0;  // when the PS-facing link is next idle
};

class OlafSwitch final : public dp::Program {
 public:
  static constexpr dp::TimeNs kIdle = std::numeric_limits<dp::TimeNs>::max();

  static absl::StatusOr<std::unique_ptr<OlafSwitch>> Create(const OlafSwitchConfig& config);
  ~OlafSwitch() override;

  std::string_view name() const override { return ToString(config_.policy); }
  const OlafSwitchConfig& config() const { return config_; }

  // Declares that packets arriving on `port` come from `flow` (the driver's
  // port table / simulator link). Replaces an earlier binding.
  // InvalidArgument for port >= dp::kMaxPorts.
  absl::Status BindPort(dp::PortId port, const FlowKey& flow);
  // Also forgets the workers learned on `port` (a lease expired, an operator
  // released it). NotFound if unbound.
  absl::Status UnbindPort(dp::PortId port);
  std::optional<FlowKey> BoundFlow(dp::PortId port) const;

  // Where non-OLAF packets arriving on `in` go. Default without a route:
  // from any port other than ps_port -> ps_port; from ps_port -> dropped
  // (no_route). InvalidArgument for ports >= dp::kMaxPorts.
  absl::Status SetPassthroughRoute(dp::PortId in, dp::PortId out);
  absl::Status ClearPassthroughRoute(dp::PortId in);

  // Changes ΔT, τ and the queue depth at run time (UpdateQueue::
  // SetRunTimeParams: depth up to the depth at Create). The control plane
  // verifies the change first (switchd/olaf_control.cc); this only applies
  // it. InvalidArgument (nothing changed) for values out of range.
  absl::Status SetRunTimeParams(dp::TimeNs delta_t_ns, dp::TimeNs tau_ns, uint32_t depth);

  ClusterTable& cluster_table() { return cluster_table_; }
  const ClusterTable& cluster_table() const { return cluster_table_; }

  // When the driver should call Advance() next: the time the PS-facing
  // link can start the next queued update, or kIdle when nothing is queued.
  dp::TimeNs NextWakeNs() const;

  const OlafCounters& totals() const { return totals_; }
  OlafQueueState queue_state(dp::TimeNs now) const;
  std::optional<OlafClusterStats> cluster(uint16_t cluster_id, dp::TimeNs now) const;
  std::vector<uint16_t> cluster_ids() const { return queue_->Clusters(); }
  const UpdateQueue& queue() const { return *queue_; }
  std::optional<WorkerRoute> worker(uint32_t worker_id) const;
  size_t worker_count() const { return workers_.size(); }
  // The PS's clock as learned from the MODELs passing through (ps_clock.h):
  // updates flagged PS_CLOCK are aged on it.
  const PsClockEstimate& ps_clock() const { return ps_clock_; }
  // Forgets every learned worker (e.g. after a job ends).
  void ClearWorkers();
  // UpdateQueue::set_eviction_observer on this switch's queue.
  void set_eviction_observer(UpdateQueue::EvictionObserver observer) {
    queue_->set_eviction_observer(std::move(observer));
  }

 private:
  explicit OlafSwitch(const OlafSwitchConfig& config, std::unique_ptr<UpdateQueue> queue);

  dp::Outcome DoProcess(std::span<const uint8_t> packet, dp::PortId ingress, dp::TimeNs now,
                        dp::PacketSink& out) override;
  void DoAdvance(dp::TimeNs now, dp::PacketSink& out) override;

  dp::Outcome Drop(dp::DropReason r);
  dp::Outcome OnUpdate(const OlafPacket& p, dp::PortId ingress, dp::TimeNs now,
                       dp::PacketSink& out);
  dp::Outcome OnAck(const OlafPacket& p, dp::TimeNs now, dp::PacketSink& out);
  dp::Outcome OnModel(std::span<const uint8_t> packet, const OlafPacket& p, dp::TimeNs now,
                      dp::PacketSink& out);
  dp::Outcome Passthrough(std::span<const uint8_t> packet, dp::PortId ingress, dp::PacketSink& out);
  bool Learn(uint32_t worker_id, dp::PortId port, uint16_t cluster_id);
  void PortCount(uint16_t cluster_id, dp::PortId port, int delta);
  // Sends everything whose transmission can start by `now`.
  void Pump(dp::TimeNs now, dp::PacketSink& out);
  // Transmits out_buf_[0, bytes) starting at `start`.
  void Transmit(dp::TimeNs start, size_t bytes, dp::PacketSink& out);

  OlafSwitchConfig config_;
  std::unique_ptr<UpdateQueue> queue_;
  PsClockEstimate ps_clock_;
  ClusterTable cluster_table_;
  std::array<std::optional<FlowKey>, dp::kMaxPorts> flows_{};
  std::array<int, dp::kMaxPorts> routes_{};  // passthrough out port, -1 = default
  absl::flat_hash_map<uint32_t, WorkerRoute> workers_;
  // Learned workers per (cluster, port), and per port over all clusters.
  absl::flat_hash_map<uint16_t, std::array<uint32_t, dp::kMaxPorts>> cluster_ports_;
  std::array<uint32_t, dp::kMaxPorts> all_ports_{};
  std::vector<uint8_t> out_buf_;  // one UPDATE datagram, reused
  dp::TimeNs link_free_ns_ = std::numeric_limits<dp::TimeNs>::min();
  uint64_t link_frac_ = 0;  // sub-ns remainder of link_free_ns_, in 1/rate ns units
  OlafCounters totals_;
};

}  // namespace inca::olaf
