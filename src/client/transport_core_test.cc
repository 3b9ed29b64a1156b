// The transport core on a simulated star: N ranks' OpCores, the real
// CaisReducer as the switch, and per-host links with a rate, a propagation
// delay and a drop-tail queue in each direction, driven by a
// discrete-event loop (no sockets, no clock). The window must fill the
// links, shrink when they slow, keep queues short, and recover losses with
// exact results.
#include "client/transport_core.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <queue>
#include <random>
#include <vector>

#include "inca/cais/reducer.h"

namespace inca::client {
namespace {

constexpr size_t kWireOverhead = 42;  // Ethernet + IPv4 + UDP per datagram, as tbf counts it

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
      std::vector<uint8_t> d(wire::kCaisHeaderBytes + payload.size());
      wire::SerializeCaisHeader(h, d);
      if (!payload.empty())
        std::memcpy(d.data() + wire::kCaisHeaderBytes, payload.data(), payload.size());
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
    rk.op = SwitchOp{};
    rk.op.data = reinterpret_cast<uint8_t*>(rk.data.data());
    rk.mirror.assign(elements_, -1e30f);  // no result is ever this
    rk.op.mirror = reinterpret_cast<uint8_t*>(rk.mirror.data());
    rk.op.count = elements_;
    rk.op.seq = static_cast<uint32_t>(k);
    rk.result = SwitchPhaseResult{};
    rk.core = std::make_unique<OpCore>(cfg_, layouts_[static_cast<size_t>(r)], rk.op, &rk.path,
                                       &rk.result);
    rk.core->Start(now_);
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
    ASSERT_FALSE(events_.empty()) << "deadlock: nothing scheduled";
    Event e = events_.top();
    events_.pop();
    now_ = std::max(now_, e.t);
    ASSERT_LT(now_, int64_t{600'000'000'000}) << "simulated 10 minutes without finishing";
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
double BoundNs(size_t bytes, double rate_bps) {
  const size_t chunks = (bytes + 8951) / 8952;
  return static_cast<double>(bytes + chunks * (wire::kCaisHeaderBytes + kWireOverhead)) * 8e9 /
         rate_bps;
}

TEST(TransportCoreSimTest, WindowFillsTheLinksAndKeepsQueuesShort) {
  Link link;                    // 1 Gbit/s, 50 us each way, 256 KB queue
  Star star(4, 1 << 20, link);  // 4 MiB of f32 per op
  const auto d = star.Run(8);
  const double bound = BoundNs(4 << 20, 1e9);
  for (size_t k = 2; k < d.size(); ++k) {
    EXPECT_GE(bound / static_cast<double>(d[k]), 0.9) << "op " << k;
  }
  for (int r = 0; r < 4; ++r) {
    // Converged below the cap and above the floor, with nothing dropped:
    // the delay target, not the queue limit, bounds the window.
    EXPECT_GT(star.path(r).window(), 2.0);
    EXPECT_LT(star.path(r).window(), 64.0);
    EXPECT_EQ(star.up(r).dropped + star.down(r).dropped, 0u);
    // The deepest queue is the burst of one window at an operation's start
    // (there is no pacing): at most the initial window of chunks.
    EXPECT_LE(star.up(r).max_queued, 16 * (wire::kCaisHeaderBytes + 8952 + kWireOverhead)) << r;
    std::printf("rank %d: window %.1f, deepest up queue %zu B, down %zu B\n", r,
                star.path(r).window(), star.up(r).max_queued, star.down(r).max_queued);
  }
  EXPECT_EQ(star.retransmitted(), 0u);
}

TEST(TransportCoreSimTest, WindowShrinksWhenTheLinkSlowsAndStillFillsIt) {
  Link link;
  link.rate_bps = 4e9;
  Star star(4, 1 << 20, link, 256);
  std::vector<double> before(4);
  const auto d = star.Run(12, [&](int k) {
    if (k == 6) {
      for (int r = 0; r < 4; ++r) before[static_cast<size_t>(r)] = star.path(r).window();
      star.SetRate(1e9);  // a rate step from R to R/4
    }
  });
  const double bound = BoundNs(4 << 20, 1e9);
  for (size_t k = 8; k < d.size(); ++k) {
    EXPECT_GE(bound / static_cast<double>(d[k]), 0.85) << "op " << k;
  }
  for (int r = 0; r < 4; ++r) {
    // The same delay target at a quarter of the rate holds a quarter of the
    // chunks in flight; the queue stays far below the limit.
    EXPECT_LT(star.path(r).window(), before[static_cast<size_t>(r)] * 0.7) << r;
    EXPECT_EQ(star.up(r).dropped + star.down(r).dropped, 0u);
  }
}

TEST(TransportCoreSimTest, JitterThatReordersIsNotReadAsAQueue) {
  // The testbed's jitter case: 2 ms +- 1 ms each way at 1 Gbit/s. Single
  // samples then vary by 4 ms, far more than the delay target's slack; a
  // queue is what raises the standing (smallest recent) round trip.
  Link link;
  link.delay_ns = 2'000'000;
  link.jitter_ns = 1'000'000;
  link.limit = size_t{2500} * 1024;  // 20 ms at 1 Gbit/s, as the testbed's tbf
  Star star(4, 1 << 20, link);
  const auto d = star.Run(8);
  const double bound = BoundNs(4 << 20, 1e9);
  for (size_t k = 3; k < d.size(); ++k) {
    EXPECT_GE(bound / static_cast<double>(d[k]), 0.7) << "op " << k;
  }
  uint64_t sent = 0;
  for (int r = 0; r < 4; ++r) {
    sent += star.result(r).sent;
    EXPECT_GT(star.path(r).noise_ns(), 200'000) << r;  // the jitter was seen as noise
    EXPECT_EQ(star.up(r).dropped + star.down(r).dropped, 0u);
    std::printf("rank %d: window %.1f, base %.2f ms, standing %.2f ms, noise %.2f ms\n", r,
                star.path(r).window(), static_cast<double>(star.path(r).base_rtt_ns()) / 1e6,
                static_cast<double>(star.path(r).standing_rtt_ns()) / 1e6,
                static_cast<double>(star.path(r).noise_ns()) / 1e6);
  }
  // Reordered chunks wait out the reordering window before they are resent:
  // at most 1 % of the chunks are sent twice (without the window, 36 %,
  // and 0.14-0.33 of the bound).
  std::printf("retransmitted %llu chunks in 8 operations of %llu each\n",
              static_cast<unsigned long long>(star.retransmitted()),
              static_cast<unsigned long long>(sent));
  EXPECT_LE(star.retransmitted() * 100, 8 * sent);
}

TEST(TransportCoreSimTest, AfterARateStepMidOperationTheWindowSettlesWithinTwentyRoundTrips) {
  // The rate step: R to R/4 in the middle of an operation. Settled:
  // rank 0's window stays within 25 % of its post-step median from then on.
  Link link;
  link.rate_bps = 4e9;
  Star star(4, 1 << 20, link, 256);
  const auto before = star.Run(6);
  const int64_t step = star.now() + before.back() / 2;
  star.SetRateAt(step, 1e9);
  star.Run(6);
  std::vector<double> after;
  double pre = 0;
  for (const auto& [t, w] : star.window_trace()) {
    if (t >= step) {
      after.push_back(w);
    } else {
      pre = w;
    }
  }
  ASSERT_FALSE(after.empty());
  std::vector<double> sorted = after;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[sorted.size() / 2];
  int64_t settled = -1;
  for (const auto& [t, w] : star.window_trace()) {
    if (t < step) continue;
    if (std::abs(w - median) > 0.25 * median) {
      settled = -1;
    } else if (settled < 0) {
      settled = t;
    }
  }
  ASSERT_GE(settled, step);
  const double rtts = static_cast<double>(settled - step) /
                      static_cast<double>(std::max<int64_t>(1, star.path(0).srtt_ns()));
  std::printf("window settled %.2f ms after the step (%.1f round trips of %.0f us), median %.1f\n",
              static_cast<double>(settled - step) / 1e6, rtts,
              static_cast<double>(star.path(0).srtt_ns()) / 1e3, median);
  EXPECT_LE(rtts, 20.0);
  EXPECT_LT(median, 0.7 * pre);  // it did follow the step down
  for (int r = 0; r < 4; ++r) EXPECT_EQ(star.up(r).dropped + star.down(r).dropped, 0u);
}

TEST(TransportCoreSimTest, PacingSpreadsTheBurstAtAnOperationsStart) {
  // 2 ms each way at 1 Gbit/s: the window reaches its cap of 64 chunks,
  // about one bandwidth-delay product, and unpaced each operation starts by
  // putting all 64 into the uplink queue at once. Paced at twice the
  // window's rate (about twice the link's), the queue grows half as fast
  // and peaks near half of that.
  Link link;
  link.delay_ns = 2'000'000;
  link.limit = size_t{2500} * 1024;
  size_t deepest[2] = {0, 0};
  double slowest[2] = {0, 0};
  for (int paced = 0; paced < 2; ++paced) {
    TransportConfig tc;
    tc.pacing_gain = paced ? 2.0 : 0.0;
    Star star(4, 1 << 20, link, 64, tc);
    star.Run(2);  // the window grows to its cap; srtt known
    star.ResetQueueMaxima();
    const auto d = star.Run(4);
    for (int r = 0; r < 4; ++r) {
      deepest[paced] = std::max(deepest[paced], star.up(r).max_queued);
      EXPECT_EQ(star.up(r).dropped + star.down(r).dropped, 0u);
    }
    slowest[paced] = static_cast<double>(*std::max_element(d.begin(), d.end()));
    std::printf("%s: deepest uplink queue %zu B, slowest op %.2f ms, window %.1f\n",
                paced ? "paced" : "unpaced", deepest[paced], slowest[paced] / 1e6,
                star.path(0).window());
  }
  EXPECT_LE(static_cast<double>(deepest[1]), 0.7 * static_cast<double>(deepest[0]));
  EXPECT_LE(slowest[1], 1.05 * slowest[0]);  // and no slower
}

// The pacer's bucket on one OpCore, no network: at most pacing_burst new
// chunks leave back to back, at the start and after a long pause alike,
// and the next one waits one pacing interval.
TEST(TransportCorePacingTest, AtMostPacingBurstChunksLeaveBackToBack) {
  struct Count final : DatagramSink {
    size_t n = 0;
    void Send(const wire::CaisHeader& h, std::span<const uint8_t>) override {
      n += !h.has_flag(wire::cais_flags::kRetransmit);  // new chunks only
    }
  };
  for (uint32_t burst : {1u, 4u}) {
    TransportConfig c;
    c.world_size = 2;
    c.initial_window = 32;
    c.pacing_gain = 1.0;
    c.pacing_burst = burst;
    GroupLayout layout{0, {0, 1}, {0, 1}};
    std::vector<float> data(64 * (8952 / 4), 1.0f);  // 64 chunks
    SwitchOp op;
    op.data = reinterpret_cast<uint8_t*>(data.data());
    op.count = data.size();
    PathState path(c);
    path.OnRtt(320'000, 0, 0);  // srtt 320 us, window 32: a chunk every 10 us
    SwitchPhaseResult r;
    OpCore core(c, layout, op, &path, &r);
    Count out;
    const int64_t t0 = 1'000'000;
    core.Start(t0);
    core.Pump(t0, out);
    EXPECT_EQ(out.n, burst) << "at the start, burst " << burst;
    core.Pump(t0, out);
    EXPECT_EQ(out.n, burst) << "nothing more at the same instant, burst " << burst;
    const int64_t next = core.NextDeadline();
    EXPECT_GT(next, t0);
    EXPECT_LE(next, t0 + 10'000);
    core.Pump(next, out);
    EXPECT_EQ(out.n, burst + 1) << "one more an interval later, burst " << burst;
    // Idle for 20 intervals (short of the tail probe's 640 us): the bucket
    // fills to pacing_burst, no further.
    core.Pump(next + 200'000, out);
    EXPECT_EQ(out.n, 2 * burst + 1) << "after a pause, burst " << burst;
  }
}

TEST(TransportCoreSimTest, LossIsRecoveredWithExactResults) {
  Link link;
  link.loss = 0.01;  // each way
  Star star(3, 300'000, link);
  star.Run(5);  // every element of every op checked by Run
  EXPECT_GT(star.retransmitted(), 0u);
  uint64_t dropped = 0;
  for (int r = 0; r < 3; ++r) dropped += star.up(r).dropped + star.down(r).dropped;
  EXPECT_GT(dropped, 0u);
}

// Losses that come seven at a time (one GSO message) at the same datagram
// loss rate: when a whole flight is lost nothing comes back to overtake it.
// The RTO alone (5 ms floor, against round trips of a few hundred us) took
// 1023 ms for 4 ops against 140 ms with single losses (7.3x) while it
// resent only the oldest chunk, 256 ms (1.8x) once it resent every chunk
// as old as the RTO; the tail probe resends them after about two round
// trips.
TEST(TransportCoreSimTest, AFlightLostWholeComesBackWithinRoundTripsNotAtTheTimeout) {
  auto total = [](int burst, double probe_rtts) {
    Link link;
    link.loss = 0.01 / burst;
    link.loss_burst = burst;
    TransportConfig c;
    c.probe_timeout_rtts = probe_rtts;
    Star star(4, 1 << 20, link, 64, c);
    const std::vector<int64_t> d = star.Run(5);
    uint64_t dropped = 0;
    for (int r = 0; r < 4; ++r) dropped += star.up(r).dropped + star.down(r).dropped;
    EXPECT_GT(dropped, 0u);
    uint64_t probes = 0;
    for (int r = 0; r < 4; ++r) probes += star.result(r).tail_probes;
    return std::make_pair(std::accumulate(d.begin() + 1, d.end(), int64_t{0}), probes);
  };
  const auto [single, single_probes] = total(1, 2.0);
  const auto [bursts, burst_probes] = total(7, 2.0);
  const auto [rto_only, none] = total(7, 0);
  std::printf(
      "4 ops of 4 MiB, 1 %% loss: single %.1f ms, bursts of 7 %.1f ms (%lu probes in "
      "the last op), RTO alone %.1f ms; bound %.1f ms\n",
      static_cast<double>(single) / 1e6, static_cast<double>(bursts) / 1e6,
      static_cast<unsigned long>(burst_probes), static_cast<double>(rto_only) / 1e6,
      4 * BoundNs(4 << 20, 1e9) / 1e6);
  EXPECT_LE(static_cast<double>(bursts), 1.4 * static_cast<double>(single));
  EXPECT_GE(4 * BoundNs(4 << 20, 1e9) / static_cast<double>(bursts), 0.7);
  EXPECT_GT(burst_probes, 0u);
  EXPECT_EQ(none, 0u);
  EXPECT_GE(static_cast<double>(rto_only), 1.5 * static_cast<double>(bursts));
}

// Ranks that reach an operation apart (issue 46): the early ranks' chunks
// wait at the switch for the last rank, which is not a loss. The early
// ranks' probes learn that the switch holds their chunks, and they resend
// nothing while they wait; the late rank's own chunks meet no wait. Before
// the probe's "held" answer restarted the timer, every early rank resent its
// window at each RTO (5 ms, then backed off) of a 30 ms wait.
TEST(TransportCoreSimTest, ARankThirtyMsLateCausesNoRetransmissionFromTheEarlyRanks) {
  Link link;
  Star star(4, 1 << 20, link);
  const int64_t on_time = star.Run(2).back();  // round trips measured
  star.SetLateness({0, 0, 0, 30'000'000});
  const std::vector<int64_t> d = star.Run(4);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(star.retransmitted_by(r), 0u) << "rank " << r;
  // Once the late rank is there, the operation takes what it takes on time
  // (the early ranks' windows were not cut by the wait).
  for (int64_t t : d) {
    EXPECT_GE(t, 30'000'000);
    EXPECT_LE(static_cast<double>(t - 30'000'000), 1.05 * static_cast<double>(on_time));
  }
  // The early ranks asked, and waited: about a probe (two requests) per half
  // RTO (5 ms floor) of the wait, not one per round trip (about 60).
  uint64_t requests = 0;
  for (int r = 0; r < 3; ++r) requests += star.result(r).requests;
  EXPECT_GT(requests, 0u);
  EXPECT_LE(requests, 3u * 2 * 15);
}

// Lateness and loss together: every loss is still recovered, exactly, and
// the late operations take no longer past the wait than the loss alone does.
TEST(TransportCoreSimTest, LossIsRecoveredAsFastWhenARankIsLate) {
  auto run = [](int64_t late) {
    Link link;
    link.loss = 0.01;
    Star star(4, 1 << 20, link);
    star.Run(2);
    star.SetLateness({0, late, 0, 0});
    const std::vector<int64_t> d = star.Run(4);
    int64_t past = 0;
    for (int64_t t : d) past += t - late;
    return std::make_pair(past, star.retransmitted());
  };
  const auto [on_time, resent_on_time] = run(0);
  const auto [late, resent_late] = run(20'000'000);
  std::printf(
      "4 ops of 4 MiB, 1 %% loss: %.2f ms on time, %.2f ms past a 20 ms wait; "
      "%lu and %lu resent\n",
      static_cast<double>(on_time) / 1e6, static_cast<double>(late) / 1e6,
      static_cast<unsigned long>(resent_on_time), static_cast<unsigned long>(resent_late));
  EXPECT_GT(resent_late, 0u);
  EXPECT_LE(static_cast<double>(late), 1.5 * static_cast<double>(on_time));
}

TEST(TransportCoreSimTest, DeterministicForTheSameInputs) {
  auto run = [] {
    Link link;
    link.loss = 0.005;
    Star star(3, 200'000, link);
    const auto d = star.Run(3);
    return std::make_pair(d, star.retransmitted());
  };
  EXPECT_EQ(run(), run());
}

// Beside a loss-based sender on every link the delay signal alone yields
// to it and keeps this rank's window at the floor; competitive mode holds a
// share, and delay control comes back once the competitor leaves.
double ShareBeside(bool competitive, Star** keep = nullptr) {
  Link link;  // 1 Gbit/s, 50 us each way, 256 KB queue (2 ms at 1 Gbit/s)
  TransportConfig c;
  c.competitive = competitive;
  c.min_window = 2;
  auto* star = new Star(4, 1 << 18, link, 64, c);  // 1 MiB per op
  star->SetCompetitor(true);
  const auto d = star->Run(40);
  double share = 0;
  for (size_t k = 20; k < d.size(); ++k) share += BoundNs(1 << 20, 1e9) / static_cast<double>(d[k]);
  share /= static_cast<double>(d.size() - 20);
  if (keep != nullptr) {
    *keep = star;
  } else {
    delete star;
  }
  return share;
}

TEST(TransportCoreSimTest, CompetitiveModeHoldsAShareBesideALossBasedSender) {
  const double yielding = ShareBeside(false);
  Star* star = nullptr;
  const double share = ShareBeside(true, &star);
  std::unique_ptr<Star> owned(star);
  std::printf("share of the link beside a Reno flow: %.2f (delay only: %.2f)\n", share, yielding);
  EXPECT_LT(yielding, 0.15);
  EXPECT_GE(share, 0.3);
  EXPECT_GT(star->competitor_bytes(), 0u);
  for (int r = 0; r < 4; ++r) {
    EXPECT_GE(star->path(r).competitive_entries(), 1u) << r;
    EXPECT_TRUE(star->path(r).competitive() || star->path(r).probing()) << r;
  }
  // The competitor leaves: the probes find the queue this rank's own, delay
  // control resumes, fills the links alone and keeps the queues short.
  star->SetCompetitor(false);
  star->Run(40);
  star->ResetQueueMaxima();
  const auto d = star->Run(5);
  for (size_t k = 0; k < d.size(); ++k) {
    EXPECT_GE(BoundNs(1 << 20, 1e9) / static_cast<double>(d[k]), 0.85) << "op " << k;
  }
  for (int r = 0; r < 4; ++r) {
    EXPECT_FALSE(star->path(r).competitive()) << r;
    EXPECT_LE(star->up(r).max_queued, 20 * (wire::kCaisHeaderBytes + 8952 + kWireOverhead)) << r;
  }
}

}  // namespace
}  // namespace inca::client
