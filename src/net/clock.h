// The clock inca's processes read, injected where code must also run under
// simulated time (Envoy's TimeSource habit): servers and endpoints take a
// TimeSource, the real processes pass SystemClock(), tests and the
// simulator a ManualClock.
//
// Every process stamps and compares CLOCK_MONOTONIC nanoseconds
// (std::chrono::steady_clock), so stamps agree between processes of one
// host only; across hosts, ages need a shared clock (issue #20).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace inca::net {

class TimeSource {
 public:
  virtual ~TimeSource() = default;
  virtual int64_t NowNs() const = 0;  // monotonic nanoseconds
};

// steady_clock (CLOCK_MONOTONIC). Thread-safe.
class MonotonicClock final : public TimeSource {
 public:
  int64_t NowNs() const override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};

// The process-wide MonotonicClock.
inline const TimeSource& SystemClock() {
  static const MonotonicClock clock;
  return clock;
}

// Time that moves only when told to. Not thread-safe.
class ManualClock final : public TimeSource {
 public:
  explicit ManualClock(int64_t start_ns = 0) : now_(start_ns) {}
  int64_t NowNs() const override { return now_; }
  void Set(int64_t ns) { now_ = ns; }
  void Advance(int64_t ns) { now_ += ns; }

 private:
  int64_t now_;
};

// A ManualClock that one thread moves while another (a server's loop) reads
// it: tests that drive a running server in their own time.
class SharedManualClock final : public TimeSource {
 public:
  explicit SharedManualClock(int64_t start_ns = 0) : now_(start_ns) {}
  int64_t NowNs() const override { return now_.load(std::memory_order_acquire); }
  void Advance(int64_t ns) { now_.fetch_add(ns, std::memory_order_acq_rel); }

 private:
  std::atomic<int64_t> now_;
};

}  // namespace inca::net
