// Shared by the CAIS integration tests: an inca-switchd process on
// loopback (Cluster), exact-valued inputs and checks for every collective,
// and small helpers for forked ranks. The test target defines
// INCA_SWITCHD_PATH.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "inca/client/communicator.h"
#include "inca/util/half.h"
#include "launch/process.h"
#include "reduce/kernels.h"

namespace inca::integration {

using launch::Process;
using wire::DType;
using wire::ReduceOp;

inline constexpr auto kRankTimeout = std::chrono::seconds(240);

struct Cluster {
  Process switchd;
  std::string switch_addr;
  int store_port = 0;

  explicit Cluster(std::vector<std::string> extra = {}, bool start = true) {
    switch_addr = absl::StrCat("127.0.0.1:", launch::FreeLoopbackPort(true));
    store_port = launch::FreeLoopbackPort(false);
    if (start) Start(extra);
  }
  void Start(std::vector<std::string> extra = {}) {
    // Chunk timeout above the skew of ranks sharing two cores (tests that
    // exercise timeouts pass their own).
    std::vector<std::string> args = {"--listen", switch_addr, "--log-level", "warn"};
    // Defaults for what `extra` does not set itself.
    for (const auto& [flag, value] :
         {std::pair{"--control-listen", "127.0.0.1:0"}, std::pair{"--http-listen", "127.0.0.1:0"},
          std::pair{"--timeout-ms", "5000"}}) {
      if (std::find(extra.begin(), extra.end(), flag) == extra.end()) {
        args.insert(args.end(), {flag, value});
      }
    }
    // These tests exercise the transport; offload decisions have their own
    // test (offload_integration_test.cc).
    args.insert(args.end(), {"--offload-controller", "off"});
    args.insert(args.end(), extra.begin(), extra.end());
    switchd = Process::Spawn(INCA_SWITCHD_PATH, args, /*quiet_stdout=*/true);
    ASSERT_TRUE(switchd.running());
    ASSERT_TRUE(launch::WaitForSwitch(switch_addr, std::chrono::seconds(10)));
  }
  CommunicatorOptions Options(int rank, int n) const {
    CommunicatorOptions o;
    o.rank = rank;
    o.world_size = n;
    o.switch_address = switch_addr;
    o.store_address = absl::StrCat("127.0.0.1:", store_port);
    o.switch_port = rank;
    o.join_timeout_ms = 5000;
    // Generous: CI runs these beside sanitizer builds on 2 cores. Tests of
    // the timeout paths set their own.
    o.switch_timeout_ms = 5000;
    return o;
  }
};

// Exact-valued inputs (see src/perf/perf.cc): any order gives the same bits.
inline double Value(ReduceOp op, int rank, size_t i) {
  switch (op) {
    case ReduceOp::kSum: return static_cast<double>(static_cast<int>(i % 7) - 3) * (rank + 1);
    case ReduceOp::kProduct:
      return ((i + rank) % 3 == 0 ? 2.0 : 1.0) * ((i + rank) % 5 == 0 ? -1 : 1);
    default: return static_cast<double>(static_cast<int>((i * 31 + rank * 17) % 101) - 50);
  }
}
inline void Put(DType t, uint8_t* p, double v) {
  if (t == DType::kF32) {
    const auto f = static_cast<float>(v);
    std::memcpy(p, &f, 4);
  } else if (t == DType::kI32) {
    const auto x = static_cast<int32_t>(v);
    std::memcpy(p, &x, 4);
  } else {
    const uint16_t h =
        t == DType::kF16 ? F32ToF16(static_cast<float>(v)) : F32ToBF16(static_cast<float>(v));
    std::memcpy(p, &h, 2);
  }
}
using reduce::Fold;

// ReduceScatter of `count` elements per rank (n * count in), checked exactly.
inline uint64_t CheckReduceScatter(Communicator& c, DType t, ReduceOp op, size_t count) {
  const size_t es = wire::ElementBytes(t);
  const int n = c.world_size(), me = c.rank();
  std::vector<uint8_t> in(count * es * static_cast<size_t>(n)), out(count * es), want(count * es);
  for (size_t i = 0; i < count * static_cast<size_t>(n); ++i) Put(t, &in[i * es], Value(op, me, i));
  for (size_t i = 0; i < count; ++i) {
    const size_t g = static_cast<size_t>(me) * count + i;
    double v = Value(op, 0, g);
    for (int r = 1; r < n; ++r) v = Fold(op, v, Value(op, r, g));
    Put(t, &want[i * es], v);
  }
  if (auto s = c.ReduceScatter(in.data(), out.data(), count, t, op); !s.ok()) {
    std::fprintf(stderr, "reducescatter: %s\n", std::string(s.message()).c_str());
    return count + 1;
  }
  uint64_t wrong = 0;
  for (size_t i = 0; i < count * es; i += es) wrong += std::memcmp(&out[i], &want[i], es) != 0;
  if (wrong)
    std::fprintf(stderr, "rank %d: reducescatter %zu elements: %lu wrong\n", me, count,
                 static_cast<unsigned long>(wrong));
  return wrong;
}

// Runs AllReduce, AllGather, Broadcast and ReduceScatter of `count`
// elements on one rank and checks them exactly. Returns the number of wrong
// elements.
inline uint64_t CheckAll(Communicator& c, DType t, ReduceOp op, size_t count, int root) {
  const size_t es = wire::ElementBytes(t);
  const int n = c.world_size(), me = c.rank();
  uint64_t wrong = 0;
  std::vector<uint8_t> buf(count * es), want(count * es);
  for (size_t i = 0; i < count; ++i) {
    Put(t, &buf[i * es], Value(op, me, i));
    double v = Value(op, 0, i);
    for (int r = 1; r < n; ++r) v = Fold(op, v, Value(op, r, i));
    Put(t, &want[i * es], v);
  }
  if (auto s = c.AllReduce(buf.data(), count, t, op); !s.ok()) {
    std::fprintf(stderr, "allreduce: %s\n", std::string(s.message()).c_str());
    return count + 1;
  }
  for (size_t i = 0; i < count * es; i += es) wrong += std::memcmp(&buf[i], &want[i], es) != 0;
  if (wrong)
    std::fprintf(stderr, "rank %d: allreduce %zu elements: %lu wrong\n", me, count,
                 static_cast<unsigned long>(wrong));
  const uint64_t after_allreduce = wrong;

  std::vector<uint8_t> in(count * es), out(count * es * static_cast<size_t>(n));
  for (size_t i = 0; i < count; ++i) Put(t, &in[i * es], Value(ReduceOp::kMax, me, i));
  if (auto s = c.AllGather(in.data(), out.data(), count, t); !s.ok()) {
    std::fprintf(stderr, "allgather: %s\n", std::string(s.message()).c_str());
    return count + 1;
  }
  std::vector<uint8_t> e(es);
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < count; ++i) {
      Put(t, e.data(), Value(ReduceOp::kMax, r, i));
      wrong += std::memcmp(&out[(static_cast<size_t>(r) * count + i) * es], e.data(), es) != 0;
    }
  }
  if (wrong != after_allreduce)
    std::fprintf(stderr, "rank %d: allgather %zu elements: %lu wrong\n", me, count,
                 static_cast<unsigned long>(wrong - after_allreduce));
  const uint64_t after_allgather = wrong;
  for (size_t i = 0; i < count; ++i)
    Put(t, &buf[i * es], me == root ? Value(ReduceOp::kMin, root, i) : 1e9);
  if (auto s = c.Broadcast(buf.data(), count, t, root); !s.ok()) {
    std::fprintf(stderr, "broadcast: %s\n", std::string(s.message()).c_str());
    return count + 1;
  }
  for (size_t i = 0; i < count; ++i) {
    Put(t, e.data(), Value(ReduceOp::kMin, root, i));
    wrong += std::memcmp(&buf[i * es], e.data(), es) != 0;
  }
  if (wrong != after_allgather)
    std::fprintf(stderr, "rank %d: broadcast %zu elements: %lu wrong\n", me, count,
                 static_cast<unsigned long>(wrong - after_allgather));
  return wrong + CheckReduceScatter(c, t, op, count);
}

inline int Fail(const char* what, const absl::Status& s) {
  std::fprintf(stderr, "%s: %s\n", what, std::string(s.message()).c_str());
  return 10;
}

// This process's stderr goes to a file until Take(), which puts it back,
// copies what was written there through, and returns it.
class StderrCapture {
 public:
  StderrCapture()
      : path_(absl::StrCat(::testing::TempDir(), "inca-stderr-", getpid())),
        saved_(dup(STDERR_FILENO)) {
    std::fflush(stderr);
    const int fd = open(path_.c_str(), O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0) {
      dup2(fd, STDERR_FILENO);
      close(fd);
    }
  }
  std::string Take() {
    std::fflush(stderr);
    dup2(saved_, STDERR_FILENO);
    close(saved_);
    std::ifstream in(path_);
    std::stringstream text;
    text << in.rdbuf();
    std::fputs(text.str().c_str(), stderr);
    std::remove(path_.c_str());
    return text.str();
  }

 private:
  std::string path_;
  int saved_;
};

// Lines of `text` that contain `needle`.
inline int CountLines(const std::string& text, const std::string& needle) {
  int n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos;
  return n;
}

inline void ExpectAllZero(const std::vector<int>& codes) {
  for (size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

}  // namespace inca::integration
