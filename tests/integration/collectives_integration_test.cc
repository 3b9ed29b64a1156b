// End-to-end: inca-switchd as a real process, ranks as forked processes,
// the CAIS client over loopback UDP with Gloo behind it.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cluster.h"
#include "inca/client/communicator.h"
#include "inca/control/control_plane.h"
#include "inca/util/half.h"
#include "inca/wire/cais.h"
#include "launch/process.h"
#include "monitor/httplib_include.h"

namespace inca::integration {
namespace {

// Every op, type and a few sizes through the switch, checked exactly; none
// may fall back to the host path. An exit code.
int EveryOpAndTypeOnTheSwitch(const CommunicatorOptions& o) {
  auto c = Communicator::Create(o);
  if (!c.ok()) return Fail("create", c.status());
  const auto n = static_cast<size_t>(o.world_size);
  uint64_t wrong = 0;
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kI32}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kProduct}) {
      for (size_t count : {size_t{1}, size_t{777}, size_t{70000}}) {
        wrong += CheckAll(**c, t, op, count, static_cast<int>(count % n));
      }
    }
  }
  const CommunicatorStats st = (*c)->stats();
  if (st.ops_host != 0) {
    std::fprintf(stderr, "rank %d: %lu ops used the host path\n", o.rank,
                 static_cast<unsigned long>(st.ops_host));
    return 11;
  }
  if (!st.switch_on_host) {
    std::fprintf(stderr, "rank %d: a switch on this host's loopback not seen as on the host\n",
                 o.rank);
    return 13;
  }
  if (!st.progress_batch) {
    std::fprintf(stderr, "rank %d: progress thread not under SCHED_BATCH beside a local switch\n",
                 o.rank);
    return 14;
  }
  return wrong == 0 ? 0 : 12;
}

class RanksTest : public ::testing::TestWithParam<int> {};

TEST_P(RanksTest, EveryOpAndTypeThroughTheSwitch) {
  const int n = GetParam();
  Cluster cl;
  ExpectAllZero(launch::RunRanks(
      n, [&](int rank) { return EveryOpAndTypeOnTheSwitch(cl.Options(rank, n)); }, kRankTimeout));
}

INSTANTIATE_TEST_SUITE_P(Ranks, RanksTest, ::testing::Values(2, 4, 8));

TEST(CollectivesTest, DroppedWorksKeepTheirBuffersAliveUntilDone) {
  // The buffers are owned only by OpOptions::on_done; every Work handle is
  // dropped at once. Under ASan a write after on_done released a buffer is
  // a heap-use-after-free.
  Cluster cl;
  ExpectAllZero(launch::RunRanks(
      2,
      [&](int rank) {
        auto c = Communicator::Create(cl.Options(rank, 2));
        if (!c.ok()) return Fail("create", c.status());
        std::atomic<int> done{0}, wrong{0};
        for (int i = 0; i < 200; ++i) {
          const size_t count = 1 + static_cast<size_t>(i) * 97 % 5000;
          auto buf = std::make_shared<std::vector<float>>(count, static_cast<float>(rank + 1));
          auto out = std::make_shared<std::vector<float>>(count);
          OpOptions o;
          o.layer_id = static_cast<uint16_t>(i % 3);
          o.on_done = [buf, &done, &wrong](const absl::Status& s) {
            if (!s.ok() || (*buf)[buf->size() - 1] != 3.0f) ++wrong;
            ++done;
          };
          (void)(*c)->AllReduceAsync(buf->data(), count, DType::kF32, ReduceOp::kSum, o);
          OpOptions rs;
          rs.on_done = [buf, out, &done, &wrong](const absl::Status& s) {
            if (!s.ok() || (*out)[0] != 6.0f) ++wrong;  // the sum of the all-reduced buffers
            ++done;
          };
          (void)(*c)->ReduceScatterAsync(buf->data(), out->data(), count / 2, DType::kF32,
                                         ReduceOp::kSum, count / 2 > 0 ? rs : OpOptions{});
          if (count / 2 == 0) ++done;
        }
        if (auto s = (*c)->Synchronize(); !s.ok()) return Fail("synchronize", s);
        if (done != 400) return 13;
        return wrong == 0 ? 0 : 12;
      },
      kRankTimeout));
}

TEST(CollectivesTest, LargeTensorsUpTo64MiB) {
  Cluster cl;
  ExpectAllZero(launch::RunRanks(
      2,
      [&](int rank) {
        auto c = Communicator::Create(cl.Options(rank, 2));
        if (!c.ok()) return Fail("create", c.status());
        uint64_t wrong = 0;
        for (size_t mib : {1, 16, 64}) {
          wrong += CheckAll(**c, DType::kF32, ReduceOp::kSum, (mib << 20) / 4, 1);
        }
        const CommunicatorStats st = (*c)->stats();
        std::fprintf(stderr, "rank %d: wrong %lu, host ops %lu, notices %lu, retransmits %lu\n",
                     rank, static_cast<unsigned long>(wrong),
                     static_cast<unsigned long>(st.ops_host),
                     static_cast<unsigned long>(st.fallback_notices),
                     static_cast<unsigned long>(st.chunks_retransmitted));
        // Exact results whichever path carried them; the switch carried some.
        return wrong == 0 && st.ops_switch > 0 ? 0 : 12;
      },
      kRankTimeout));
}

TEST(CollectivesTest, YieldToLocalSwitchOffLeavesTheProgressThreadAsItWas) {
  Cluster cl;
  ExpectAllZero(launch::RunRanks(
      2,
      [&](int rank) {
        CommunicatorOptions o = cl.Options(rank, 2);
        o.yield_to_local_switch = false;
        auto c = Communicator::Create(o);
        if (!c.ok()) return Fail("create", c.status());
        const uint64_t wrong = CheckAll(**c, DType::kF32, ReduceOp::kSum, 70000, 0);
        const CommunicatorStats st = (*c)->stats();
        if (st.ops_switch == 0 || !st.switch_on_host) return 13;
        return wrong == 0 && !st.progress_batch ? 0 : 12;
      },
      kRankTimeout));
}

TEST(CollectivesTest, OperationsBeyond65535ChunksAreSplitIntoPieces) {
  // 256-byte chunks: 5M f32 elements need 78,125 chunks (two pieces); an
  // AllGather of 1M elements per rank over 2 ranks needs 31,250 per block.
  Cluster cl({"--chunk-size", "256"});
  ExpectAllZero(launch::RunRanks(
      2,
      [&](int rank) {
        auto o = cl.Options(rank, 2);
        o.chunk_size = 256;
        o.max_pending_chunks = 256;
        auto c = Communicator::Create(o);
        if (!c.ok()) return Fail("create", c.status());
        uint64_t wrong = CheckAll(**c, DType::kF32, ReduceOp::kSum, 5'000'000, 1);
        const CommunicatorStats st = (*c)->stats();
        std::fprintf(stderr, "rank %d: chunks sent %lu, host ops %lu\n", rank,
                     static_cast<unsigned long>(st.chunks_sent),
                     static_cast<unsigned long>(st.ops_host));
        return wrong == 0 && st.chunks_sent > 65535 ? 0 : 12;
      },
      kRankTimeout));
}

TEST(CollectivesTest, DeterministicModeIsBitwiseTheRankOrderReduction) {
  Cluster cl({"--deterministic"});
  const int n = 4;
  const size_t count = 50000;
  ExpectAllZero(launch::RunRanks(
      n,
      [&](int rank) {
        auto c = Communicator::Create(cl.Options(rank, n));
        if (!c.ok()) return Fail("create", c.status());
        auto input = [](int r, size_t i) {
          std::mt19937 g(static_cast<uint32_t>(r * 1000003 + i));
          return std::uniform_real_distribution<float>(-1e3f, 1e3f)(g);
        };
        std::vector<float> x(count);
        for (size_t i = 0; i < count; ++i) x[i] = input(rank, i);
        if (auto s = (*c)->AllReduce(x.data(), count, DType::kF32, ReduceOp::kSum); !s.ok()) {
          return Fail("allreduce", s);
        }
        for (size_t i = 0; i < count; ++i) {
          float v = input(0, i);  // ascending port order == rank order here
          for (int r = 1; r < n; ++r) v += input(r, i);
          if (std::memcmp(&v, &x[i], 4) != 0) return 12;
        }
        return 0;
      },
      kRankTimeout));
}

TEST(CollectivesTest, LossOfFivePercentEachWay) {
  Cluster cl({"--ingress-loss", "0.05", "--egress-loss", "0.05"});
  ExpectAllZero(launch::RunRanks(
      4,
      [&](int rank) {
        auto o = cl.Options(rank, 4);
        auto c = Communicator::Create(o);
        if (!c.ok()) return Fail("create", c.status());
        uint64_t wrong = 0;
        for (int it = 0; it < 3; ++it) {
          for (DType t : {DType::kF32, DType::kBF16}) {
            wrong += CheckAll(**c, t, ReduceOp::kSum, 300000, it % 4);
          }
        }
        const CommunicatorStats st = (*c)->stats();
        if (st.chunks_retransmitted + st.result_requests == 0) return 13;  // loss was recovered
        return wrong == 0 ? 0 : 12;
      },
      kRankTimeout));
}

TEST(CollectivesTest, OnePercentLoss) {
  Cluster cl({"--ingress-loss", "0.01", "--egress-loss", "0.01"});
  ExpectAllZero(launch::RunRanks(
      8,
      [&](int rank) {
        auto c = Communicator::Create(cl.Options(rank, 8));
        if (!c.ok()) return Fail("create", c.status());
        uint64_t wrong = 0;
        for (int it = 0; it < 3; ++it)
          wrong += CheckAll(**c, DType::kF32, ReduceOp::kSum, 200000, it);
        return wrong == 0 ? 0 : 12;
      },
      kRankTimeout));
}

// n forked ranks, each with a communicator from options(rank), run `ops`
// checked collectives (count base + k). Once rank 0 has finished operation
// `signal_after` (and, with switch_only_before, every rank found all of them
// on the switch path), `victim` is killed. Every rank must then finish with
// exact results, operations on both paths, and one warning. Exit codes.
std::vector<int> RunKillingMidRun(int n, int ops, size_t base, int signal_after,
                                  bool switch_only_before,
                                  const std::function<CommunicatorOptions(int)>& options,
                                  Process& victim) {
  int progress[2];
  EXPECT_EQ(pipe(progress), 0);
  auto fn = [&](int rank) {
    close(progress[0]);
    StderrCapture err;
    auto c = Communicator::Create(options(rank));
    if (!c.ok()) {
      err.Take();  // so that the reason reaches the test's output
      return Fail("create", c.status());
    }
    uint64_t wrong = 0;
    for (int k = 0; k < ops; ++k) {
      wrong += CheckAll(**c, DType::kF32, ReduceOp::kSum, base + static_cast<size_t>(k), k % n);
      if (k != signal_after) continue;
      if (switch_only_before && (*c)->stats().ops_host != 0) return 17;
      const char x = 1;
      if (rank == 0 && write(progress[1], &x, 1) != 1) return 14;
    }
    const CommunicatorStats st = (*c)->stats();
    // Every rank ran the rest on the host path and said so once.
    if (CountLines(err.Take(), absl::StrCat("inca rank ", rank, ": warning: group 0")) != 1) {
      return 16;
    }
    if (st.ops_switch == 0 || st.ops_host == 0) {
      std::fprintf(stderr, "rank %d: switch ops %lu host ops %lu\n", rank,
                   static_cast<unsigned long>(st.ops_switch),
                   static_cast<unsigned long>(st.ops_host));
      return 15;
    }
    return wrong == 0 ? 0 : 12;
  };
  // Fork first (no threads yet), then wait for the signal and kill.
  std::vector<Process> procs;
  for (int r = 0; r < n; ++r) {
    const pid_t pid = fork();
    if (pid == 0) _exit(fn(r));
    procs.emplace_back(pid);
  }
  close(progress[1]);
  char x = 0;
  EXPECT_EQ(read(progress[0], &x, 1), 1);
  victim.Signal(SIGKILL);
  victim.Wait(std::chrono::seconds(5));
  std::vector<int> codes;
  for (auto& p : procs) codes.push_back(p.Wait(kRankTimeout));
  close(progress[0]);
  return codes;
}

TEST(CollectivesTest, SwitchKilledMidRunRanksFinishOnGloo) {
  Cluster cl;
  const int n = 4;
  ExpectAllZero(RunKillingMidRun(
      n, 40, 100000, 9, false, [&](int rank) { return cl.Options(rank, n); }, cl.switchd));
}

// Striping over two switch processes (INCA_SWITCH=a,b): every collective
// exact with each operation cut over both; once switch b is killed, the
// operations whose stripe it held finish on the host path, exact, and the
// ranks say so once (an operation that did not need b could not fall back).
TEST(CollectivesTest, StripedOverTwoSwitchesAndALostStripeGoesToTheHostPath) {
  Cluster a, b;
  const int n = 3;
  ExpectAllZero(RunKillingMidRun(
      n, 16, 50000, 5, true,
      [&](int rank) {
        CommunicatorOptions o = a.Options(rank, n);
        o.switch_address = absl::StrCat(a.switch_addr, ",", b.switch_addr);
        return o;
      },
      b.switchd));
}

// A UDP relay between one rank and the switch that drops what the switch
// sends that rank about the last `tail` chunks of one operation: the n-th
// distinct seq_num the rank sends data under. (Dropping all of it would
// stall the others too: the rank's window would not move, so it would not
// send the rest of its chunks.) Runs on its own thread until destroyed.
class DropOneOpsTail {
 public:
  DropOneOpsTail(const std::string& switch_addr, int nth, int tail) : nth_(nth), tail_(tail) {
    const auto colon = switch_addr.rfind(':');
    to_switch_.sin_family = AF_INET;
    to_switch_.sin_port = htons(static_cast<uint16_t>(std::stoi(switch_addr.substr(colon + 1))));
    inet_pton(AF_INET, switch_addr.substr(0, colon).c_str(), &to_switch_.sin_addr);
    for (int* fd : {&rank_side_, &switch_side_}) {
      *fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      EXPECT_EQ(bind(*fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    }
    sockaddr_in a{};
    socklen_t len = sizeof(a);
    getsockname(rank_side_, reinterpret_cast<sockaddr*>(&a), &len);
    address_ = absl::StrCat("127.0.0.1:", ntohs(a.sin_port));
  }
  ~DropOneOpsTail() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    close(rank_side_);
    close(switch_side_);
  }
  // After the ranks are forked (no threads before fork).
  void Start() {
    thread_ = std::thread([this] { Loop(); });
  }
  const std::string& address() const { return address_; }
  uint64_t dropped() const { return dropped_; }

 private:
  void Loop() {
    std::vector<uint8_t> buf(65536);
    sockaddr_in rank{};
    bool have_rank = false;
    std::vector<uint32_t> seqs;  // distinct seq_nums of the rank's data, in order
    const auto deadline = std::chrono::steady_clock::now() + kRankTimeout;
    while (!stop_ && std::chrono::steady_clock::now() < deadline) {
      pollfd p[2] = {{rank_side_, POLLIN, 0}, {switch_side_, POLLIN, 0}};
      if (poll(p, 2, 50) <= 0) continue;
      if (p[0].revents & POLLIN) {
        socklen_t len = sizeof(rank);
        const ssize_t got = recvfrom(rank_side_, buf.data(), buf.size(), 0,
                                     reinterpret_cast<sockaddr*>(&rank), &len);
        if (got > 0) {
          have_rank = true;
          wire::CaisPacketView v;
          if (wire::ParseCais({buf.data(), static_cast<size_t>(got)}, &v) ==
                  wire::CaisParseError::kOk &&
              std::find(seqs.begin(), seqs.end(), v.header.seq_num) == seqs.end()) {
            seqs.push_back(v.header.seq_num);
          }
          sendto(switch_side_, buf.data(), static_cast<size_t>(got), 0,
                 reinterpret_cast<const sockaddr*>(&to_switch_), sizeof(to_switch_));
        }
      }
      if (p[1].revents & POLLIN) {
        const ssize_t got = recv(switch_side_, buf.data(), buf.size(), 0);
        if (got <= 0 || !have_rank) continue;
        wire::CaisPacketView v;
        if (seqs.size() >= static_cast<size_t>(nth_) &&
            wire::ParseCais({buf.data(), static_cast<size_t>(got)}, &v) ==
                wire::CaisParseError::kOk &&
            v.header.seq_num == seqs[static_cast<size_t>(nth_ - 1)] &&
            v.header.chunk_id + tail_ >= v.header.total_chunks) {
          ++dropped_;
          continue;
        }
        sendto(rank_side_, buf.data(), static_cast<size_t>(got), 0,
               reinterpret_cast<const sockaddr*>(&rank), sizeof(rank));
      }
    }
  }

  const int nth_, tail_;
  sockaddr_in to_switch_{};
  int rank_side_ = -1, switch_side_ = -1;
  std::string address_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> dropped_{0};
  std::thread thread_;
};

// Rank 1 never gets the last results of the third all-reduce, so it leaves
// the switch there; rank 0, which got them all and went on, is stuck in the
// fourth (rank 1 does not contribute) and leaves too. Rank 0 then serves the third
// operation's result from its recovery cache, which the switch path filled
// as the results arrived (SwitchOp::mirror), and both end exact.
TEST(CollectivesTest, ARankAheadServesTheOperationAPeerLostFromItsCache) {
  Cluster cl;
  DropOneOpsTail relay(cl.switch_addr, 3, 3);
  const int n = 2, ops = 6;
  const size_t count = 100000;  // 45 chunks
  std::vector<Process> procs;
  for (int r = 0; r < n; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      CommunicatorOptions o = cl.Options(r, n);
      if (r == 1) o.switch_address = relay.address();
      o.switch_timeout_ms = 1500;
      auto c = Communicator::Create(o);
      if (!c.ok()) _exit(Fail("create", c.status()));
      uint64_t wrong = 0;
      for (int k = 0; k < ops; ++k) {
        std::vector<float> x(count), want(count);
        for (size_t i = 0; i < count; ++i) {
          x[i] = static_cast<float>(Value(ReduceOp::kSum, r, i + static_cast<size_t>(k)));
          want[i] = static_cast<float>(Value(ReduceOp::kSum, 0, i + static_cast<size_t>(k)) +
                                       Value(ReduceOp::kSum, 1, i + static_cast<size_t>(k)));
        }
        if (auto s = (*c)->AllReduce(x.data(), count, DType::kF32, ReduceOp::kSum); !s.ok()) {
          _exit(Fail("allreduce", s));
        }
        for (size_t i = 0; i < count; ++i) wrong += x[i] != want[i];
      }
      const CommunicatorStats st = (*c)->stats();
      std::fprintf(stderr, "rank %d: switch ops %lu, host ops %lu, served %lu, wrong %lu\n", r,
                   static_cast<unsigned long>(st.ops_switch),
                   static_cast<unsigned long>(st.ops_host),
                   static_cast<unsigned long>(st.served_peers), static_cast<unsigned long>(wrong));
      if (wrong != 0) _exit(12);
      // The first two on the switch; rank 0 served exactly once.
      if (st.ops_switch < 2 || st.ops_host == 0) _exit(15);
      _exit(st.served_peers == (r == 0 ? 1u : 0u) ? 0 : 16);
    }
    procs.emplace_back(pid);
  }
  relay.Start();
  for (size_t r = 0; r < procs.size(); ++r) EXPECT_EQ(procs[r].Wait(kRankTimeout), 0) << r;
  EXPECT_GT(relay.dropped(), 0u);
}

TEST(CollectivesTest, OffloadResumesWhenTheSwitchComesBack) {
  Cluster cl;
  int progress[2];
  ASSERT_EQ(pipe(progress), 0);
  const int n = 2;
  std::vector<Process> procs;
  for (int r = 0; r < n; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      close(progress[0]);
      auto o = cl.Options(r, n);
      o.rejoin_interval_ms = 100;
      o.switch_timeout_ms = 300;
      auto c = Communicator::Create(o);
      if (!c.ok()) _exit(Fail("create", c.status()));
      uint64_t wrong = 0;
      bool told = false;
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      // Phase 1: until the switch is gone (we see host ops); phase 2: until
      // offload resumes; bounded by the deadline.
      while (std::chrono::steady_clock::now() < deadline) {
        wrong += CheckAll(**c, DType::kF32, ReduceOp::kSum, 5000, 0);
        const CommunicatorStats st = (*c)->stats();
        if (r == 0 && !told && st.ops_switch >= 5) {
          const char b = 1;
          if (write(progress[1], &b, 1) != 1) _exit(14);
          told = true;
        }
        if (st.rejoins > 0 && st.offload_active && st.ops_host > 0) break;
      }
      const CommunicatorStats st = (*c)->stats();
      _exit(wrong == 0 && st.rejoins > 0 ? 0 : 16);
    }
    procs.emplace_back(pid);
  }
  close(progress[1]);
  char b = 0;
  ASSERT_EQ(read(progress[0], &b, 1), 1);
  cl.switchd.Signal(SIGKILL);
  cl.switchd.Wait(std::chrono::seconds(5));
  cl.Start();  // same address: the ranks rejoin
  for (size_t r = 0; r < procs.size(); ++r) EXPECT_EQ(procs[r].Wait(kRankTimeout), 0) << r;
  close(progress[0]);
}

TEST(CollectivesTest, NoSwitchMeansHostPathWithRightResults) {
  Cluster cl({}, /*start=*/false);  // nothing listens at switch_addr
  ExpectAllZero(launch::RunRanks(
      3,
      [&](int rank) {
        auto o = cl.Options(rank, 3);
        o.join_timeout_ms = 200;
        StderrCapture err;
        auto c = Communicator::Create(o);
        if (!c.ok()) return Fail("create", c.status());
        const uint64_t wrong = CheckAll(**c, DType::kBF16, ReduceOp::kMax, 12345, 2);
        const CommunicatorStats st = (*c)->stats();
        // Issue 18: the fallback is said once, however many operations take it.
        const int warned =
            CountLines(err.Take(), absl::StrCat("inca rank ", rank, ": warning: group 0"));
        if (warned != 1) return 13;
        return wrong == 0 && st.ops_switch == 0 && !st.offload_active ? 0 : 12;
      },
      kRankTimeout));
}

TEST(CollectivesTest, SetOffloadFalseMovesTheGroupToTheHostPath) {
  Cluster cl;
  ExpectAllZero(launch::RunRanks(
      2,
      [&](int rank) {
        auto o = cl.Options(rank, 2);
        o.switch_timeout_ms = 300;
        auto c = Communicator::Create(o);
        if (!c.ok()) return Fail("create", c.status());
        uint64_t wrong = CheckAll(**c, DType::kF32, ReduceOp::kSum, 1000, 0);
        if ((*c)->stats().ops_host != 0) return 17;
        (*c)->SetOffload(false);
        for (int k = 0; k < 3; ++k) wrong += CheckAll(**c, DType::kF32, ReduceOp::kSum, 1000, 1);
        const CommunicatorStats st = (*c)->stats();
        return wrong == 0 && st.ops_host >= 9 && !st.offload_active ? 0 : 12;
      },
      kRankTimeout));
}

// inca-switchd --threads 2: the ranks name shard 0's port only, learn of
// shard 1 from the JOIN_REPLY and stripe every operation over both. Every
// op and type is exact and on the switch path; both shards carried data;
// each shard's packets are accounted for on their own and the control
// API's figures are their sums; /metrics shows each shard.
TEST(CollectivesTest, ThreadsTwoShardsEveryOpAndTypeAndConservationPerShard) {
  const std::string control = absl::StrCat("127.0.0.1:", launch::FreeLoopbackPort(false));
  const std::string http = absl::StrCat("127.0.0.1:", launch::FreeLoopbackPort(false));
  Cluster cl({}, /*start=*/false);
  cl.Start({"--threads", "2", "--control-listen", control, "--http-listen", http});
  const int n = 3;
  ExpectAllZero(launch::RunRanks(
      n, [&](int rank) { return EveryOpAndTypeOnTheSwitch(cl.Options(rank, n)); }, kRankTimeout));
  // Threads (gRPC) only after the forks.
  auto plane = control::ConnectControl(control, "");
  ASSERT_TRUE(plane.ok()) << plane.status();
  auto st = (*plane)->GetStats();
  ASSERT_TRUE(st.ok()) << st.status();
  ASSERT_EQ(st->shards.size(), 2u);
  uint64_t rx = 0, completed = 0;
  for (const control::ShardStats& sh : st->shards) {
    // Over gRPC drops come by name only, so each shard's own check travels.
    EXPECT_TRUE(sh.conserved) << "shard " << sh.shard;
    EXPECT_GT(sh.counters.cais.completed_chunks, 0u) << "shard " << sh.shard << " got no chunk";
    EXPECT_GE(sh.counters.mgmt_rx, 3u) << "shard " << sh.shard << ": every rank joins it";
    rx += sh.counters.datagrams_rx;
    completed += sh.counters.cais.completed_chunks;
  }
  EXPECT_EQ(st->shards[1].endpoint,
            absl::StrCat("127.0.0.1:", std::stoi(cl.switch_addr.substr(10)) + 1));
  EXPECT_TRUE(st->conserved);
  EXPECT_EQ(st->counters.datagrams_rx, rx);
  EXPECT_EQ(st->counters.cais.completed_chunks, completed);
  auto config = (*plane)->GetConfig();
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->at("threads"), "2");
  httplib::Client web(absl::StrCat("http://", http));
  auto metrics = web.Get("/metrics");
  ASSERT_TRUE(metrics) << "GET /metrics";
  for (const char* shard : {"0", "1"}) {
    EXPECT_NE(metrics->body.find(
                  absl::StrCat("inca_shard_cais_completed_chunks_total{shard=\"", shard, "\"}")),
              std::string::npos)
        << shard;
    EXPECT_NE(metrics->body.find(absl::StrCat("inca_shard_conserved{shard=\"", shard, "\"} 1")),
              std::string::npos)
        << shard;
  }
}

// IPv6 end to end: the switch's data socket, its control API and the
// ranks' sockets on ::1, every op through the switch, on both I/O paths.
TEST(CollectivesTest, Ipv6LoopbackThroughTheSwitchAndItsControlApi) {
  for (const char* io : {"mmsg", "gso"}) {
    const std::string sw = absl::StrCat("[::1]:", launch::FreeLoopbackPort(true));
    const std::string control = absl::StrCat("[::1]:", launch::FreeLoopbackPort(false));
    const int store_port = launch::FreeLoopbackPort(false);
    Process switchd = Process::Spawn(
        INCA_SWITCHD_PATH,
        {"--listen", sw, "--log-level", "warn", "--control-listen", control, "--http-listen", "off",
         "--offload-controller", "off", "--timeout-ms", "5000", "--io", io},
        /*quiet_stdout=*/true);
    ASSERT_TRUE(switchd.running());
    ASSERT_TRUE(launch::WaitForSwitch(sw, std::chrono::seconds(10))) << io;
    Process health = Process::Spawn(INCA_CAIS_CLI_PATH, {"--device", control, "health"}, true);
    EXPECT_EQ(health.Wait(std::chrono::seconds(30)), 0) << "cais-cli health over IPv6, " << io;
    ExpectAllZero(launch::RunRanks(
        2,
        [&](int rank) {
          CommunicatorOptions o;
          o.rank = rank;
          o.world_size = 2;
          o.switch_address = sw;
          o.bind_ip = "::1";
          o.io = io;
          o.store_address = absl::StrCat("127.0.0.1:", store_port);
          o.switch_port = rank;
          o.join_timeout_ms = 5000;
          o.switch_timeout_ms = 5000;
          auto c = Communicator::Create(o);
          if (!c.ok()) return Fail("create", c.status());
          uint64_t wrong = 0;
          for (DType t : {DType::kF32, DType::kBF16}) {
            for (size_t count : {size_t{777}, size_t{70000}}) {
              wrong += CheckAll(**c, t, ReduceOp::kSum, count, 1);
            }
          }
          if ((*c)->stats().ops_host != 0) return 11;
          return wrong == 0 ? 0 : 12;
        },
        kRankTimeout));
  }
}

}  // namespace
}  // namespace inca::integration
