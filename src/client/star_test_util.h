// The transport core's simulated star (transport_core_test.cc,
// arrive_apart_test.cc): N ranks' OpCores, the real CaisReducer as the
// switch, and per-host links with a rate, a propagation delay and a
// drop-tail queue in each direction, driven by a discrete-event loop (no
// sockets, no clock).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <deque>
#include <functional>
#include <memory>
#include <queue>
#include <random>
#include <utility>
#include <vector>

#include "client/transport_core.h"
#include "inca/cais/reducer.h"

namespace inca::client::testing {

inline constexpr size_t kWireOverhead = 42;  // Ethernet + IPv4 + UDP per datagram, as tbf counts it

// One direction of a link: drop-tail FIFO of `limit` bytes at `rate_bps`,
// then `delay_ns` of propagation, each datagram's +- U(jitter_ns) (as
// netem's "delay D J": datagrams further apart than the jitter keep their
// order, closer ones may swap).
struct Link {
  double rate_bps = 1e9;
  int64_t delay_ns = 50'000;
  int64_t jitter_ns = 0;
  size_t limit = 256 * 1024;
  double loss = 0;
  // Datagrams dropped per loss event: a GSO message lost whole takes up to
  // seven 8,952-byte datagrams with it.
  int loss_burst = 1;
  int burst_left = 0;
  int64_t busy_until = 0;
  std::deque<std::pair<int64_t, size_t>> queued;  // departure time, bytes
  size_t queued_bytes = 0;
  size_t max_queued = 0;
  uint64_t dropped = 0;

  // Returns the arrival time at the far end, or -1 if dropped.
  int64_t Enqueue(int64_t now, size_t bytes, std::mt19937_64& rng) {
    while (!queued.empty() && queued.front().first <= now) {
      queued_bytes -= queued.front().second;
      queued.pop_front();
    }
    const size_t wire = bytes + kWireOverhead;
    if (queued_bytes + wire > limit) {
      ++dropped;
      return -1;
    }
    if (burst_left > 0) {
      --burst_left;
      ++dropped;
      return -1;
    }
    if (loss > 0 && std::uniform_real_distribution<double>(0, 1)(rng) < loss) {
      burst_left = loss_burst - 1;
      ++dropped;
      return -1;
    }
    const int64_t start = std::max(now, busy_until);
    busy_until = start + static_cast<int64_t>(static_cast<double>(wire) * 8e9 / rate_bps);
    queued.emplace_back(busy_until, wire);
    queued_bytes += wire;
    max_queued = std::max(max_queued, queued_bytes);
    int64_t j = 0;
    if (jitter_ns > 0) j = std::uniform_int_distribution<int64_t>(-jitter_ns, jitter_ns)(rng);
    return busy_until + std::max<int64_t>(0, delay_ns + j);
  }
};

// Starts operation `seq`, an f32 sum all-reduce of `data` in place, on a
// simulated rank's transport core at `now` (`mirror`: SwitchOp::mirror).
inline std::unique_ptr<OpCore> StartSumAllReduce(const TransportConfig& c,
                                                 const GroupLayout& layout,
                                                 std::vector<float>& data, uint32_t seq,
                                                 int64_t now, PathState* path, SwitchOp* op,
                                                 SwitchPhaseResult* result,
                                                 float* mirror = nullptr) {
  *op = SwitchOp{};
  op->data = reinterpret_cast<uint8_t*>(data.data());
  op->mirror = reinterpret_cast<uint8_t*>(mirror);
  op->count = data.size();
  op->seq = seq;
  *result = SwitchPhaseResult{};
  auto core = std::make_unique<OpCore>(c, layout, *op, path, result);
  core->Start(now);
  return core;
}

// Takes the simulation's next event out of `events` (a min-queue by time)
// into `*e` and moves `*now` to it; false, failing the test, when nothing
// is scheduled (a deadlock) or 10 simulated minutes passed.
template <typename Queue, typename Event>
bool NextEvent(Queue& events, int64_t* now, Event* e) {
  if (events.empty()) {
    [] { FAIL() << "deadlock: nothing scheduled"; }();
    return false;
  }
  *e = events.top();
  events.pop();
  *now = std::max(*now, e->t);
  if (*now >= int64_t{600'000'000'000}) {
    [] { FAIL() << "simulated 10 minutes without finishing"; }();
    return false;
  }
  return true;
}

class Star {
 public:
  Star(int n, size_t elements, const Link& link, uint32_t max_window = 64,
       const TransportConfig& base = {})
      : n_(n), elements_(elements), cfg_(base) {
    cfg_.world_size = n;
    cfg_.max_window = max_window;
    cais::CaisConfig sc;
    sc.sram_bytes = size_t{64} << 20;
    sc.max_pending_chunks = 4096;
    sc.timeout_ns = 500'000'000;
    switch_ = *cais::CaisReducer::Create(sc);
    cais::PortMask ports;
    for (int r = 0; r < n; ++r) ports.add(static_cast<dp::PortId>(r));
    cais::Rule rule{cais::RuleKey{0, std::nullopt, std::nullopt}, ports, ports, std::nullopt};
    EXPECT_TRUE(switch_->rules().Add(rule).ok());
    layouts_.resize(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      auto& l = layouts_[static_cast<size_t>(r)];
      l.my_index = r;
      for (int k = 0; k < n; ++k) {
        l.rank_at_index.push_back(k);
        l.index_of_rank.push_back(k);
      }
      ranks_.push_back(std::make_unique<Rank>(cfg_));
      up_.push_back(link);
      down_.push_back(link);
      flows_.emplace_back();
    }
  }

  // Starts or stops a loss-based competitor on every link: flow r runs
  // from host r through the switch to host r+1 (as a Gloo ring does) with
  // a Reno window (+1 segment per round trip, halved on a loss).
  void SetCompetitor(bool on) {
    competing_ = on;
    if (!on) return;
    for (int r = 0; r < n_; ++r) PumpFlow(r);
  }
  uint64_t competitor_bytes() const {
    uint64_t b = 0;
    for (const Flow& f : flows_) b += f.delivered;
    return b;
  }
  void ResetQueueMaxima() {
    for (auto& l : up_) l.max_queued = 0;
    for (auto& l : down_) l.max_queued = 0;
  }

  void SetRate(double bps) {
    for (auto& l : up_) l.rate_bps = bps;
    for (auto& l : down_) l.rate_bps = bps;
  }
  // Every link changes to `bps` at simulated time `at` (mid-operation).
  void SetRateAt(int64_t at, double bps) {
    step_bps_ = bps;
    Push(at, 6, 0, {});
  }
  // Rank 0's window after every change: (time, window).
  const std::vector<std::pair<int64_t, double>>& window_trace() const { return trace_; }

  // Runs `ops` all-reduces back to back on every rank; returns each op's
  // duration (ns, from the last rank's start to the last rank's end).
  std::vector<int64_t> Run(int ops, const std::function<void(int)>& before_op = {}) {
    std::vector<int64_t> durations;
    for (int i = 0; i < ops; ++i) {
      if (before_op) before_op(i);
      const int k = ops_run_++;  // sequence numbers go on across runs
      const int64_t start = now_;
      for (int r = 0; r < n_; ++r) {
        const int64_t late = late_ns_.empty() ? 0 : late_ns_[static_cast<size_t>(r)];
        if (late == 0) {
          StartOp(r, k);
        } else {
          ranks_[static_cast<size_t>(r)]->core.reset();  // reaches the operation later
          Push(now_ + late, 7, r, {});
        }
      }
      while (std::any_of(ranks_.begin(), ranks_.end(),
                         [](const auto& rk) { return !rk->core || !rk->core->Finished(); })) {
        Step();
      }
      for (int r = 0; r < n_; ++r) {
        EXPECT_TRUE(ranks_[static_cast<size_t>(r)]->result.complete) << "op " << k << " rank " << r;
        Check(r, k);
      }
      durations.push_back(now_ - start);
    }
    return durations;
  }

  // Rank r reaches each later operation late_ns[r] after the others (as
  // ranks of a tensor-parallel job do when their compute differs).
  void SetLateness(std::vector<int64_t> late_ns) { late_ns_ = std::move(late_ns); }
  // Chunks each rank resent, over every operation run so far.
  uint64_t retransmitted_by(int r) const { return by_rank_[static_cast<size_t>(r)]; }

  const PathState& path(int r) const { return ranks_[static_cast<size_t>(r)]->path; }
  const SwitchPhaseResult& result(int r) const { return ranks_[static_cast<size_t>(r)]->result; }
  const Link& up(int r) const { return up_[static_cast<size_t>(r)]; }
  const Link& down(int r) const { return down_[static_cast<size_t>(r)]; }
  uint64_t retransmitted() const { return retransmitted_; }
  int64_t now() const { return now_; }

 private:
  struct Rank {
    explicit Rank(const TransportConfig& c) : path(c) {}
    PathState path;
    std::vector<float> data;
    std::vector<float> mirror;  // SwitchOp::mirror: must end equal to data
    SwitchOp op;
    SwitchPhaseResult result;
    std::unique_ptr<OpCore> core;
  };
  struct Flow {
    double window = 4;
    int inflight = 0;
    int64_t last_cut = INT64_MIN / 2;
    uint64_t delivered = 0;
  };
  static constexpr size_t kSegment = 8948;
  struct Event {
    int64_t t;
    uint64_t id;
    // 0: at the switch from rank `who`; 1: at rank `who`; 2: wake rank `who`;
    // 3: competitor segment of flow `who` at the switch; 4: its ACK back at
    // the sender; 5: the sender learns that it was lost; 6: the rate step.
    int kind;
    int who;
    std::vector<uint8_t> bytes;
    bool operator>(const Event& o) const { return t != o.t ? t > o.t : id > o.id; }
  };

  class ToSwitch final : public DatagramSink {
   public:
    ToSwitch(Star* s, int r) : s_(s), r_(r) {}
    void Send(const wire::CaisHeader& h, std::span<const uint8_t> payload) override {
      std::vector<uint8_t> d = wire::SerializeCais(h, payload);
      const int64_t at = s_->up_[static_cast<size_t>(r_)].Enqueue(s_->now_, d.size(), s_->rng_);
      if (at >= 0) s_->Push(at, 0, r_, std::move(d));
    }
    Star* s_;
    int r_;
  };
  class FromSwitch final : public dp::PacketSink {
   public:
    explicit FromSwitch(Star* s) : s_(s) {}
    void Emit(dp::PortId port, std::span<const uint8_t> p) override {
      const int64_t at = s_->down_[port].Enqueue(s_->now_, p.size(), s_->rng_);
      if (at >= 0) s_->Push(at, 1, port, std::vector<uint8_t>(p.begin(), p.end()));
    }
    Star* s_;
  };

  void Push(int64_t t, int kind, int who, std::vector<uint8_t> bytes) {
    events_.push(Event{t, next_id_++, kind, who, std::move(bytes)});
  }

  static float Input(int rank, int op, size_t i) {
    return static_cast<float>(static_cast<int>((i + op) % 7) - 3) * static_cast<float>(rank + 1);
  }

  void StartOp(int r, int k) {
    Rank& rk = *ranks_[static_cast<size_t>(r)];
    rk.data.resize(elements_);
    for (size_t i = 0; i < elements_; ++i) rk.data[i] = Input(r, k, i);
    rk.mirror.assign(elements_, -1e30f);  // no result is ever this
    rk.core =
        StartSumAllReduce(cfg_, layouts_[static_cast<size_t>(r)], rk.data, static_cast<uint32_t>(k),
                          now_, &rk.path, &rk.op, &rk.result, rk.mirror.data());
    Pump(r);
  }

  void Pump(int r) {
    Rank& rk = *ranks_[static_cast<size_t>(r)];
    const uint64_t before = rk.result.retransmitted;
    ToSwitch sink(this, r);
    rk.core->Pump(now_, sink);
    retransmitted_ += rk.result.retransmitted - before;
    by_rank_[static_cast<size_t>(r)] += rk.result.retransmitted - before;
    if (r == 0 && (trace_.empty() || trace_.back().second != rk.path.window())) {
      trace_.emplace_back(now_, rk.path.window());
    }
    if (!rk.core->Finished()) Push(rk.core->NextDeadline(), 2, r, {});
  }

  void PumpFlow(int r) {
    Flow& f = flows_[static_cast<size_t>(r)];
    const int64_t rtt = 2 * (up_[0].delay_ns + down_[0].delay_ns);
    while (competing_ && f.inflight < static_cast<int>(f.window)) {
      ++f.inflight;
      const int64_t at = up_[static_cast<size_t>(r)].Enqueue(now_, kSegment, rng_);
      if (at < 0) {
        Push(now_ + rtt, 5, r, {});
      } else {
        Push(at, 3, r, {});
      }
    }
  }

  void FlowEvent(const Event& e) {
    Flow& f = flows_[static_cast<size_t>(e.who)];
    const int64_t back = up_[0].delay_ns + down_[0].delay_ns;  // the ACK's way home
    if (e.kind == 3) {
      const int64_t at = down_[static_cast<size_t>((e.who + 1) % n_)].Enqueue(now_, kSegment, rng_);
      Push(at < 0 ? now_ + 2 * back : at + back, at < 0 ? 5 : 4, e.who, {});
      return;
    }
    --f.inflight;
    if (e.kind == 4) {
      f.delivered += kSegment;
      f.window = std::min(f.window + 1.0 / f.window, 4096.0);
    } else if (now_ - f.last_cut > 2 * back) {
      f.window = std::max(2.0, f.window / 2);
      f.last_cut = now_;
    }
    PumpFlow(e.who);
  }

  void Step() {
    Event e{};
    if (!NextEvent(events_, &now_, &e)) return;
    if (e.kind == 6) {
      SetRate(step_bps_);
      return;
    }
    if (e.kind == 7) {
      StartOp(e.who, ops_run_ - 1);
      return;
    }
    if (e.kind >= 3) {
      FlowEvent(e);
      return;
    }
    if (e.kind == 0) {
      FromSwitch out(this);
      switch_->Advance(now_, out);
      switch_->Process(e.bytes, static_cast<dp::PortId>(e.who), now_, out);
      return;
    }
    Rank& rk = *ranks_[static_cast<size_t>(e.who)];
    if (!rk.core || rk.core->Finished()) return;
    if (e.kind == 1) rk.core->OnDatagram(e.bytes, now_);
    Pump(e.who);
  }

  void Check(int r, int k) {
    const Rank& rk = *ranks_[static_cast<size_t>(r)];
    size_t wrong = 0;
    for (size_t i = 0; i < elements_; ++i) {
      float want = 0;
      for (int q = 0; q < n_; ++q) want += Input(q, k, i);
      wrong += rk.data[i] != want;
    }
    EXPECT_EQ(wrong, 0u) << "op " << k << " rank " << r;
    EXPECT_EQ(std::memcmp(rk.mirror.data(), rk.data.data(), elements_ * sizeof(float)), 0)
        << "op " << k << " rank " << r << ": the mirror differs from the result";
  }

  int n_;
  size_t elements_;
  TransportConfig cfg_;
  std::unique_ptr<cais::CaisReducer> switch_;
  std::vector<GroupLayout> layouts_;
  std::vector<std::unique_ptr<Rank>> ranks_;
  std::vector<Link> up_, down_;
  std::vector<Flow> flows_;
  bool competing_ = false;
  double step_bps_ = 0;
  std::vector<std::pair<int64_t, double>> trace_;
  int ops_run_ = 0;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  uint64_t next_id_ = 0;
  int64_t now_ = 0;
  uint64_t retransmitted_ = 0;
  std::vector<int64_t> late_ns_;
  std::vector<uint64_t> by_rank_ = std::vector<uint64_t>(64, 0);
  std::mt19937_64 rng_{42};
};

// The time an all-reduce of `bytes` needs when each host link carries
// rate_bps each way: the tensor up once and down once, in 8952-byte chunks.
inline double BoundNs(size_t bytes, double rate_bps) {
  const size_t chunks = (bytes + 8951) / 8952;
  return static_cast<double>(bytes + chunks * (wire::kCaisHeaderBytes + kWireOverhead)) * 8e9 /
         rate_bps;
}

}  // namespace inca::client::testing
