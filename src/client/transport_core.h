// The CAIS client's transport as a pure core: one operation's chunks
// through the switch (window, congestion control, retransmission timers,
// fast retransmission, result requests, fallback and decline notices), with
// time and I/O injected. SwitchTransport drives it over a UDP socket; the
// tests drive it over a simulated link and the real CaisReducer. Design and
// reasons: docs/design/cais-client.md, "Transport core".
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "inca/wire/cais.h"
#include "inca/wire/mgmt.h"

namespace inca::client {

// One operation (or one piece of a larger one) as the switch sees it.
struct SwitchOp {
  wire::CaisOp op = wire::CaisOp::kAllReduce;
  wire::DType type = wire::DType::kF32;
  wire::ReduceOp reduce = wire::ReduceOp::kSum;
  uint32_t seq = 0;
  uint16_t layer_id = 0;
  // AllReduce and Broadcast: `data` holds `count` elements, in place.
  // AllGather: `in` holds this rank's `count` elements; block r of the
  // result goes to out + r * block_stride_bytes.
  // ReduceScatter: block r of the input (`count` elements) is at
  // in + r * block_stride_bytes; this rank's reduced block goes to `out`.
  uint8_t* data = nullptr;
  const uint8_t* in = nullptr;
  uint8_t* out = nullptr;
  size_t block_stride_bytes = 0;
  // AllReduce: when set, every result is also written here, at its offset
  // in `data`, while the payload is still in cache (the communicator's
  // recovery cache, docs/design/cais-client.md, "Recovery").
  uint8_t* mirror = nullptr;
  size_t count = 0;
  int root = 0;  // Broadcast
  // A broadcast carried as an AllReduce-sum (the communicator's choice).
  bool broadcast = false;
};

// Number of chunks `op` needs (AllGather, ReduceScatter: over all blocks).
uint64_t ChunkCount(const SwitchOp& op, uint32_t chunk_size, int world_size);
// The operation's size as the switch's offload admission estimates it:
// total chunks x the first chunk's payload (what a REPORT carries, so the
// switch files the time under the size class it decides by).
uint64_t OffloadEstimate(const SwitchOp& op, uint32_t chunk_size, int world_size);

struct SwitchPhaseResult {
  bool complete = false;
  uint32_t total_chunks = 0;
  // have[c] != 0: this rank holds chunk c's final value (ReduceScatter: or
  // knows that its owner got it).
  std::vector<uint8_t> have;
  bool fallback_notice = false;  // the switch handed back at least one chunk
  // The switch's offload policy declined the operation (DECLINED notice):
  // run it on the host path and stay joined.
  bool declined = false;
  // The switch handed a chunk back because the ranks' chunks differ in
  // shape (a FALLBACK notice with block kFallbackShapeMismatch): the ranks
  // disagree about the operation, the switch and the group are fine.
  bool disagreed = false;
  // The DECLINED notice's reason (wire::DeclineReason; 0: none given).
  uint8_t declined_reason = 0;
  uint64_t sent = 0;
  uint64_t retransmitted = 0;
  uint64_t requests = 0;
  uint64_t notices = 0;
  uint64_t tail_probes = 0;  // quiet spells that sent a tail probe (result requests)
};

struct TransportConfig {
  uint8_t group_id = 0;
  int world_size = 1;
  uint32_t chunk_size = 8952;
  // Congestion window bounds, in chunks of this rank in flight.
  uint32_t min_window = 1;
  uint32_t max_window = 64;
  uint32_t initial_window = 16;
  // Retransmission timeout: floor and cap (the estimate is srtt + 4 rttvar,
  // doubled per consecutive timeout).
  int64_t rto_min_ns = 5'000'000;
  int64_t rto_max_ns = 100'000'000;
  // No progress for this long: the operation leaves the switch.
  int64_t give_up_ns = 1'000'000'000;
  // Delay-based window control (after Swift, Kumar et al., SIGCOMM 2020):
  // the signal is the standing round trip (Copa's: the smallest sample of
  // the last half smoothed round trip, and of at least standing_samples
  // samples), so that jitter, which raises single samples, is not read as
  // a queue, which raises them all. The target is the smallest round trip
  // seen plus a slack of max(target_floor_ns, base / 4, jitter_factor x
  // the path's noise), the noise term at most the base (one bandwidth-delay
  // product of queue); the noise is the mean of sample - standing. Below
  // the target the window grows by ai per round trip, above it shrinks by
  // beta * (standing - target) / standing, at most max_decrease, once per
  // round trip.
  int64_t target_floor_ns = 300'000;
  // A switch on this host (net::OnThisHost: loopback, or an address of this
  // host): no link lies between, and what raises the round trip is the
  // scheduling of the ranks and the switch on shared cores, which larger
  // batches relieve rather than worsen. The floor is then
  // host_target_floor_ns, about a scheduler time slice
  // (docs/design/cais-client.md, "A switch on this host").
  bool switch_on_host = false;
  int64_t host_target_floor_ns = 2'000'000;
  double ai = 1.0;
  double beta = 0.8;
  double max_decrease = 0.5;
  uint32_t standing_samples = 4;
  double jitter_factor = 2.0;
  // Fast retransmission (after RACK, RFC 8985): a chunk is taken as lost
  // once this many chunks this rank sent after it have completed and it is
  // older than the smoothed round trip plus a reordering window of
  // max(base / 4, jitter_factor x noise).
  uint32_t reorder_threshold = 3;
  // Tail probe (after RACK-TLP, RFC 8985): when nothing completed for
  // max(probe_timeout_rtts x srtt, srtt + the reordering window), and that
  // is shorter than the RTO, a result request goes for the oldest and the
  // newest overdue own chunk, once per quiet spell. If the switch answers
  // that it lacks this rank's contribution (PENDING, block 0), every
  // overdue own chunk is resent (the window at most), without the RTO's
  // window cut and back-off. 0: off.
  double probe_timeout_rtts = 2.0;
  // Pacing: new chunks leave at most pacing_gain x window / srtt (a token
  // bucket: at most pacing_burst chunks back to back), so that an
  // operation's first window and each growth step do not arrive at the
  // bottleneck as one burst. 0: off
  // (the default: on the testbed it made no difference beyond run-to-run
  // noise; docs/design/cais-client.md).
  double pacing_gain = 0;
  uint32_t pacing_burst = 4;
  // The smallest round trip is forgotten after this long, so that a path
  // that got slower for good does not keep a stale target.
  int64_t base_rtt_window_ns = 10'000'000'000;
  // Competitive mode (after Copa's, Arun and Balakrishnan, NSDI 2018): a
  // queue that stays above competitive_queue_factor times the target's
  // slack (target - base) for a whole epoch (epoch_rtts smoothed round
  // trips) while this rank's window is at most competitive_gate chunks is
  // not this rank's queue, nor another delay-controlled job's (those hold
  // it near the target), but a loss-based sender's (TCP, a Gloo job).
  // Yielding to it would starve this rank, so the window then follows AIMD
  // on loss (+ai per round trip, halved on a loss) until an epoch sees the
  // target again. Every probe_interval_ns in that mode the window drops to
  // min_window for two round trips: if the queue then drains it was this
  // rank's own, and delay control resumes.
  bool competitive = true;
  uint32_t competitive_gate = 4;
  double competitive_queue_factor = 3;
  int epoch_rtts = 5;
  int64_t probe_interval_ns = 2'000'000'000;
  // Window samples kept for inspection (0: none): one at most every quarter
  // round trip and on every loss or timeout, the oldest dropped first.
  size_t trace_capacity = 0;
};

// The window at one moment (PathState::trace).
struct WindowSample {
  int64_t at_ns;
  double window;
  int64_t srtt_ns;
};

// What persists across the operations of one group: the round-trip
// estimate and the congestion window.
class PathState {
 public:
  explicit PathState(const TransportConfig& c);

  double window() const { return cwnd_; }
  // Chunks this rank may have in flight now.
  uint32_t window_chunks() const;
  // The switch's window advice (wire::MgmtMessage::window_chunks): the
  // window stays at most `cap` (0: no advice, max_window alone).
  void set_window_cap(uint32_t cap);
  // max_window, or the advice when it is smaller.
  uint32_t max_window() const;
  int64_t rto_ns() const;
  int64_t srtt_ns() const { return static_cast<int64_t>(srtt_); }
  int64_t rttvar_ns() const { return static_cast<int64_t>(rttvar_); }
  // The smoothed switch wait of this rank's contributions (as srtt: gain
  // 1/8; 0 before any, and with a switch that reports none).
  int64_t switch_wait_ns() const { return static_cast<int64_t>(wait_); }
  int64_t base_rtt_ns() const { return base_rtt_; }
  int64_t target_ns() const;
  // The smallest recent sample (see TransportConfig) and the path's noise.
  int64_t standing_rtt_ns() const { return standing_; }
  int64_t noise_ns() const { return static_cast<int64_t>(noise_); }
  // How long past the smoothed round trip an overtaken chunk may still be
  // on its way.
  int64_t reorder_window_ns() const;

  // A valid round-trip sample (Karn: never of a retransmitted chunk), and
  // how long of it this rank's contribution waited in the switch for the
  // other ranks (the result's switch wait; -1 if the result has none). Delay control
  // uses the whole round trip (a rank ahead of the others slows to their
  // pace); competitive mode's entry test uses the round trip less the
  // wait, so that waiting for a slower rank is not taken for a loss-based
  // sender's queue (its exit and drain probe keep the whole round trip).
  void OnRtt(int64_t rtt_ns, int64_t now, int64_t switch_wait_ns = -1);
  // The retransmission timer fired: back off, halve the window.
  void OnTimeout(int64_t now);
  // A chunk was inferred lost (fast retransmission). Ignored by delay
  // control (random loss says nothing about congestion); halves the window
  // in competitive mode.
  void OnLoss(int64_t now);

  uint64_t decreases() const { return decreases_; }
  uint64_t timeouts() const { return timeouts_; }
  bool competitive() const { return competitive_; }
  bool switch_on_host() const { return c_.switch_on_host; }
  bool probing() const { return probe_until_ != 0; }
  uint64_t competitive_entries() const { return competitive_entries_; }
  uint64_t probes() const { return probes_; }
  // The recorded window samples, oldest first (TransportConfig::
  // trace_capacity), and how many were recorded in all.
  const std::deque<WindowSample>& trace() const { return trace_; }
  uint64_t traced() const { return traced_; }

 private:
  void Decrease(double factor, int64_t now);
  void Sample(int64_t rtt, int64_t now, int64_t switch_wait);
  void Trace(int64_t now, bool force);
  // Mode changes at the end of each epoch and of each drain probe.
  void TrackEpoch(int64_t rtt, int64_t own, int64_t now);
  void EndProbe(int64_t now);
  int64_t Rtt() const;
  // Records a sample; returns the standing round trip.
  int64_t Standing(int64_t rtt, int64_t now);

  const TransportConfig c_;
  double cwnd_;
  uint32_t cap_ = 0;  // the switch's advice; 0: none
  double srtt_ = 0;
  double rttvar_ = 0;
  int64_t base_rtt_ = 0;
  int64_t base_rtt_at_ = 0;
  static constexpr size_t kRecent = 128;  // samples kept for the standing round trip
  std::array<std::pair<int64_t, int64_t>, kRecent> recent_{};  // (at, rtt), a ring
  size_t recent_head_ = 0, recent_n_ = 0;
  int64_t standing_ = 0;
  double noise_ = 0;
  double wait_ = 0;
  int backoff_ = 0;
  int64_t last_decrease_ = INT64_MIN / 2;
  uint64_t decreases_ = 0;
  uint64_t timeouts_ = 0;
  // Competitive mode.
  bool competitive_ = false;
  int64_t epoch_start_ = -1;
  int64_t epoch_min_ = 0;
  int64_t epoch_own_min_ = 0;  // the same, less the switch wait
  bool epoch_small_ = true;    // the window stayed within competitive_gate
  int64_t next_probe_ = 0;
  int64_t probe_until_ = 0;  // 0: no probe running
  int64_t probe_min_ = 0;
  double probe_saved_cwnd_ = 0;
  int64_t probe_saved_srtt_ = 0;
  uint64_t competitive_entries_ = 0;
  uint64_t probes_ = 0;
  std::deque<WindowSample> trace_;
  uint64_t traced_ = 0;
  int64_t last_trace_ = INT64_MIN / 2;
};

// Where this rank sits among the group's switch ports (ascending port
// order is the switch's input-port order).
struct GroupLayout {
  int my_index = 0;
  std::vector<int> rank_at_index;  // rank at port index i
  std::vector<int> index_of_rank;  // port index of rank r
};
// The layout of rank `rank` from a JOIN reply's rank_ports (each rank's
// switch port, in rank order) and block order: by port (one switch) or, in
// a tree of switches, by rank.
GroupLayout LayoutFromPorts(std::span<const uint16_t> rank_ports, int rank,
                            wire::BlockOrder order = wire::BlockOrder::kPorts);

// Receives what the core sends: a header and the payload bytes (which stay
// valid until the operation ends).
class DatagramSink {
 public:
  virtual ~DatagramSink() = default;
  virtual void Send(const wire::CaisHeader& h, std::span<const uint8_t> payload) = 0;
};

// One operation. Not thread-safe; no clock, no sockets.
class OpCore {
 public:
  OpCore(const TransportConfig& c, const GroupLayout& layout, const SwitchOp& op, PathState* path,
         SwitchPhaseResult* result);

  // Starts at `now`; call before anything else.
  void Start(int64_t now);
  // A datagram from the switch (anything else is ignored).
  void OnDatagram(std::span<const uint8_t> datagram, int64_t now);
  // Sends what is due at `now`: new chunks within the window, retransmissions
  // whose timer fired or that were inferred lost, result requests.
  void Pump(int64_t now, DatagramSink& out);
  // When Pump next has something to do (absent new datagrams).
  int64_t NextDeadline() const;
  // Every chunk done, a notice ended the operation, or no progress for
  // give_up_ns (checked by Pump). Sets result->complete.
  bool Finished() const { return finished_; }

  // A datagram of the next operations (seq one or two ahead), kept by the
  // driver and replayed when that operation starts.
  bool IsEarly(std::span<const uint8_t> datagram) const;

 private:
  bool Blocked() const;
  bool Own(uint32_t c) const;
  bool Receives(uint32_t c) const;
  size_t Length(uint32_t c) const;
  uint8_t* Locate(uint32_t c) const;
  const uint8_t* Source(uint32_t c) const;
  bool WorthRequesting(uint32_t c, bool tail_ok) const;
  // Nanoseconds between new chunks at the pacing rate; 0: not paced.
  int64_t PacingInterval() const;
  // The tail probe's timeout (TransportConfig::probe_timeout_rtts); 0: none.
  int64_t ProbeTimeout() const;
  void SendTailProbe(int64_t now, int64_t overdue, DatagramSink& out);
  // Pump's steps, in order: own chunks overtaken by later ones (and
  // resends due again), the tail probe and what its answer asks for, the
  // retransmission timer, new chunks within the window, result requests
  // for chunks other ranks own.
  void FastRetransmit(int64_t now, int64_t rto, int64_t overdue, DatagramSink& out);
  void Probe(int64_t now, int64_t overdue, int64_t pto, DatagramSink& out);
  void RetransmitTimer(int64_t now, int64_t rto, int64_t overdue, int64_t pto, DatagramSink& out);
  void SendNew(int64_t now, DatagramSink& out);
  void RequestOthers(int64_t now, DatagramSink& out);
  void Send(uint32_t c, bool retransmit, bool request, DatagramSink& out);
  // Sends own chunk c again (fast retransmission or the RTO) and gives it a
  // new place in the send order.
  void Resend(uint32_t c, int64_t now, DatagramSink& out);
  void Complete(uint32_t c, bool fallback, int64_t now, int64_t switch_wait = -1);
  void Finish();

  const TransportConfig& c_;
  const GroupLayout& layout_;
  const SwitchOp& op_;
  PathState& path_;
  SwitchPhaseResult& r_;
  size_t esize_;
  size_t per_;    // elements per chunk
  uint64_t cpb_;  // chunks per block (AllGather, ReduceScatter) or in total
  int root_index_;

  std::vector<int64_t> sent_at_;    // own chunks: last transmission; -1 never; -2 done
  std::vector<int64_t> first_at_;   // for RTT samples; -1 once retransmitted (Karn)
  std::vector<uint32_t> order_;     // this rank's send order of each own chunk
  std::vector<uint8_t> fast_done_;  // fast-retransmitted at least once
  std::deque<uint32_t> inflight_;   // own chunks in send order (done ones pruned lazily)
  uint32_t outstanding_ = 0;
  uint32_t next_own_ = 0;
  uint32_t send_counter_ = 0;
  int64_t pace_at_ = INT64_MIN / 2;  // when the next new chunk may leave
  uint32_t completed_order_hi_ = 0;  // highest send order completed, + 1
  uint64_t remaining_ = 0;
  int64_t last_progress_ = 0;
  int64_t rto_deadline_ = 0;  // the oldest outstanding chunk's timer
  bool probed_ = false;       // the tail probe fired since the last progress
  bool missing_ = false;      // a probe's answer: the switch lacks a contribution
  bool held_ = false;         // a probe's answer: the switch holds it, waiting for others
  int held_rounds_ = 0;       // answers "held" since the last progress (the probe backs off)
  int64_t request_at_ = 0;
  int64_t request_rto_ = 0;
  uint32_t request_cursor_ = 0;
  std::vector<int64_t> highest_;  // AllGather: highest chunk seen per owner block
  bool handed_back_ = false;
  bool finished_ = false;
};

}  // namespace inca::client
