// inca-sim nodes for the OLAF evaluation: DRL workers, a parameter server
// and OLAF/FIFO switches. Workers and the PS run the same WorkerCore/PsCore
// as the UDP endpoints, the switch runs the same OlafSwitch as
// inca-switchd; only time and the wire are simulated.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "inca/olaf/olaf_switch.h"
#include "inca/olaf/ps.h"
#include "inca/olaf/worker.h"
#include "inca/sim/simulator.h"

namespace inca::sim {

enum class PeriodDist : uint8_t { kFixed, kExponential };

struct WorkerNodeConfig {
  uint16_t cluster_id = 0;
  uint32_t worker_id = 1;  // stamped by the worker (non-zero: switches keep it)
  size_t elements = 2233;  // f32 per update (2233 = one 9000-byte frame)
  TimeNs period_ns = 100 * dp::kNsPerMs;
  PeriodDist dist = PeriodDist::kFixed;
  TimeNs jitter_ns = 0;                   // uniform [0, jitter) added to each period
  TimeNs phase_ns = 0;                    // first update at phase + jitter
  olaf::SendControlOptions send_control;  // mode kOff: always send
  uint64_t seed = 1;
  // Optional compute model: called per update to produce the gradient
  // (issue 9's co-simulation); default: a constant vector.
  std::function<void(std::vector<float>&, uint32_t model_version)> compute;
  // Closed loop (the OLAF paper's workers, which roll out on the newest
  // model): after sending an update, wait for a MODEL newer than the one the
  // update was computed on, then roll out for period_ns (plus jitter) before
  // the next. A worker that hears no newer model within model_wait_ns rolls
  // out on the one it has. Open loop (false): a fixed grid, models or not.
  bool closed_loop = false;
  TimeNs model_wait_ns = 400 * dp::kNsPerMs;
  // This worker's CLOCK_MONOTONIC against the simulator's (= the PS's):
  // local = t + clock_offset_ns + t·clock_drift_ppm/1e6. Its core sees only
  // local times; `clock` says whose clock it stamps (olaf::WorkerClock).
  TimeNs clock_offset_ns = 0;
  double clock_drift_ppm = 0;
  olaf::WorkerClock clock = olaf::WorkerClock::kLocal;
  // Added to each datagram's size in bytes_sent() (the switch's per-frame
  // egress overhead), so offered load is counted as the bottleneck sees it.
  uint32_t frame_overhead_bytes = 66;
  // No rollout starts at or after this time (the ns-3 comparison's sources
  // stop; scenarios run to their end).
  TimeNs stop_ns = std::numeric_limits<TimeNs>::max();
};

// What a worker's loop needs from the simulator that hosts it: inca-sim's
// WorkerNode, ns-3's OlafWorkerApp (inca/ns3/olaf_apps.h). Times are the
// host simulator's, in ns.
class WorkerHost {
 public:
  virtual ~WorkerHost() = default;
  virtual TimeNs Now() = 0;
  // Runs `fn` at `at` (>= Now()).
  virtual void At(TimeNs at, std::function<void()> fn) = 0;
  // Sends one datagram toward the PS.
  virtual void SendUp(std::vector<uint8_t> datagram) = 0;
};

// A worker's update loop, written once for every simulator that hosts it:
// when to roll out (fixed grid, exponential, closed loop), the gradient, the
// WorkerCore that builds and gates each update, and the datagrams it hears.
class WorkerLoop {
 public:
  // The worker core's error (InvalidArgument) for a configuration it refuses.
  static absl::StatusOr<std::unique_ptr<WorkerLoop>> Create(const WorkerNodeConfig& config,
                                                            WorkerHost* host);
  void Start();
  void OnDatagram(std::span<const uint8_t> datagram);
  const olaf::WorkerCore& core() const { return *core_; }
  uint64_t bytes_sent() const { return bytes_sent_; }
  uint64_t model_waits_timed_out() const { return waits_timed_out_; }
  const WorkerNodeConfig& config() const { return config_; }

 private:
  WorkerLoop(const WorkerNodeConfig& config, WorkerHost* host,
             std::unique_ptr<olaf::WorkerCore> core);
  void Tick();
  void At(TimeNs at);  // the next Tick, unless at >= stop_ns
  void ScheduleNext(TimeNs after);
  void Resume(bool timed_out);
  TimeNs Jitter();
  TimeNs LocalNow();
  WorkerNodeConfig config_;
  WorkerHost* host_;
  std::unique_ptr<olaf::WorkerCore> core_;
  std::mt19937_64 rng_;
  std::vector<float> grad_;
  TimeNs ticks_ = 0;
  uint64_t bytes_sent_ = 0;
  // Closed loop: waiting for a model newer than wait_version_; wait_token_
  // tells a timeout that the wait it was armed for has ended.
  bool waiting_ = false;
  uint32_t wait_version_ = 0;
  uint64_t wait_token_ = 0;
  uint64_t waits_timed_out_ = 0;
};

class WorkerNode final : public Node, private WorkerHost {
 public:
  // The worker core's error (InvalidArgument) for a configuration it refuses.
  static absl::StatusOr<std::unique_ptr<WorkerNode>> Create(std::string name,
                                                            const WorkerNodeConfig& config);
  void Start() override { loop_->Start(); }
  void Receive(dp::PortId, Packet packet) override { loop_->OnDatagram(packet); }
  const olaf::WorkerCore& core() const { return loop_->core(); }
  uint64_t generated() const { return core().counters().generated; }
  uint64_t sent() const { return core().counters().sent; }
  // Bytes of the UPDATE datagrams sent, each with frame_overhead_bytes.
  uint64_t bytes_sent() const { return loop_->bytes_sent(); }
  // Closed loop: rollouts started without a newer model (the wait timed out).
  uint64_t model_waits_timed_out() const { return loop_->model_waits_timed_out(); }
  const WorkerNodeConfig& config() const { return loop_->config(); }

 private:
  explicit WorkerNode(std::string name) : Node(std::move(name)) {}
  TimeNs Now() override { return sim().now(); }
  void At(TimeNs at, std::function<void()> fn) override { sim().Schedule(at, std::move(fn)); }
  void SendUp(std::vector<uint8_t> datagram) override { Send(0, std::move(datagram)); }
  std::unique_ptr<WorkerLoop> loop_;
};

struct PsNodeConfig {
  olaf::PsOptions ps;  // apply / model policy; defaults: apply nothing
};

class PsNode final : public Node {
 public:
  // The PS core's error for options it refuses.
  static absl::StatusOr<std::unique_ptr<PsNode>> Create(std::string name, PsNodeConfig config);
  void Receive(dp::PortId port, Packet packet) override;
  const olaf::PsCore& core() const { return *core_; }
  olaf::PsCore& mutable_core() { return *core_; }

 private:
  PsNode(std::string name, std::unique_ptr<olaf::PsCore> core)
      : Node(std::move(name)), core_(std::move(core)) {}
  std::unique_ptr<olaf::PsCore> core_;
};

// An OLAF or FIFO switch: port 0 (the first link connected) faces the PS.
class SwitchNode final : public Node {
 public:
  // clock_offset_ns: the switch's clock − the simulator's (= the PS's).
  // The switch program's error for a configuration it refuses.
  static absl::StatusOr<std::unique_ptr<SwitchNode>> Create(std::string name,
                                                            const olaf::OlafSwitchConfig& config,
                                                            TimeNs clock_offset_ns = 0);
  ~SwitchNode() override;
  void Receive(dp::PortId port, Packet packet) override;
  const olaf::OlafSwitch& program() const { return *program_; }

 private:
  class Sink;
  SwitchNode(std::string name, std::unique_ptr<olaf::OlafSwitch> program, TimeNs clock_offset_ns);
  void Wake();
  void ArmWake();
  std::unique_ptr<olaf::OlafSwitch> program_;
  std::unique_ptr<Sink> sink_;
  TimeNs wake_at_ = olaf::OlafSwitch::kIdle;
  TimeNs clock_offset_ns_ = 0;
};

// Workers of one cluster sit behind an edge (port 0 up, ports 1..n the
// workers) that forwards their datagrams up and routes ACKs (by worker_id,
// learned from their updates) and MODELs (to every worker) down: the
// cluster's multicast group of the OLAF paper's 2.3.
class ClusterEdge final : public Node {
 public:
  explicit ClusterEdge(std::string name) : Node(std::move(name)) {}
  void Receive(dp::PortId port, Packet p) override;
  void set_workers(uint32_t n) { workers_ = static_cast<dp::PortId>(n); }

 private:
  std::map<uint32_t, dp::PortId> by_worker_;
  dp::PortId workers_ = 0;
};

// Updates of cluster 0 with exponential inter-arrival times and payload
// sizes drawn from `size_bytes` (the queueing-theory validation source).
struct PoissonSourceConfig {
  double rate_per_s = 1000;
  std::function<uint32_t(std::mt19937_64&)> size_bytes;  // multiple of 4, >= 4
  uint64_t seed = 1;
  uint64_t max_updates = UINT64_MAX;
};

class PoissonSource final : public Node {
 public:
  PoissonSource(std::string name, PoissonSourceConfig config);
  void Start() override;
  void Receive(dp::PortId, Packet) override {}
  uint64_t sent() const { return sent_; }

 private:
  void Next();
  PoissonSourceConfig config_;
  std::mt19937_64 rng_;
  uint64_t sent_ = 0;
};

}  // namespace inca::sim
