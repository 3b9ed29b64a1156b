// A delay line for one direction of a link: what netem's delay, jitter and
// reorder do, in user space, for kernels built without sch_netem. The
// testbed (scripts/testbed.py) runs it between a host's veth and the
// switch's bridge when a link asks for delay and the kernel has no netem;
// docs/testbed.md has the picture.
//
// Pure: the caller passes the time, the frames and a seed; nothing here
// reads a clock or touches a socket (PacketLink does, in packet_link.h).
//
// Semantics follow netem's:
//   - each frame is held for delay + U(-jitter, +jitter), clamped at 0, and
//     frames leave in order of their release times, so jitter larger than the
//     gap between frames reorders them;
//   - `reorder` is the fraction of frames sent at once, without the delay
//     (netem's "reorder P": those overtake the frames held before them);
//   - the line holds at most `max_frames` frames and `max_bytes` bytes; a
//     frame beyond either is dropped and counted (netem's "limit").
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace inca::linkdelay {

struct DelaySpec {
  int64_t delay_ns = 0;
  int64_t jitter_ns = 0;  // uniform in [delay - jitter, delay + jitter]
  double reorder = 0.0;   // fraction of frames sent without the delay, [0, 1]

  absl::Status Validate() const;
  bool active() const { return delay_ns > 0 || jitter_ns > 0; }
};

struct DelayLineLimits {
  size_t max_frames = 10000;
  size_t max_bytes = size_t{64} << 20;
};

// A frame and the buffer (of `cap` bytes) that holds it: the line moves
// buffers, it never copies them, so that the caller can receive into one
// and send from it.
struct Frame {
  std::unique_ptr<uint8_t[]> data;
  size_t len = 0;
  size_t cap = 0;
  static Frame Allocate(size_t cap) {
    return Frame{std::make_unique_for_overwrite<uint8_t[]>(cap), 0, cap};
  }
  absl::Span<const uint8_t> bytes() const { return {data.get(), len}; }
};

struct DelayLineCounters {
  uint64_t frames_in = 0;
  uint64_t frames_out = 0;
  uint64_t bytes_out = 0;
  uint64_t dropped_limit = 0;  // the line was full (max_frames or max_bytes)
  uint64_t sent_at_once = 0;   // picked by `reorder`
  uint64_t overtaken = 0;      // left after a frame that arrived later
  uint64_t max_frames_held = 0;
  uint64_t max_bytes_held = 0;
  std::string ToJson() const;
};

class DelayLine {
 public:
  DelayLine(const DelaySpec& spec, const DelayLineLimits& limits, uint64_t seed);

  // Holds `f` until now + its delay. When the line is full: false, counted,
  // and `f` is handed back (for its buffer to be reused).
  bool Push(int64_t now_ns, Frame& f);
  // The same for a copy of `bytes`.
  bool Push(int64_t now_ns, absl::Span<const uint8_t> bytes);

  // When the next frame is due; nullopt when the line is empty.
  std::optional<int64_t> NextDueNs() const;

  // Appends every frame due at `now_ns` to `out`, in release order, up to
  // `max_frames` of them (the caller's batch); returns how many.
  size_t ReleaseDue(int64_t now_ns, size_t max_frames, std::vector<Frame>& out);

  size_t frames_held() const { return held_.size(); }
  size_t bytes_held() const { return bytes_held_; }
  const DelayLineCounters& counters() const { return counters_; }

 private:
  struct Held {
    int64_t due_ns;
    uint64_t seq;  // arrival order: ties leave in arrival order
    Frame frame;
  };
  struct Later {
    bool operator()(const Held& a, const Held& b) const {
      return a.due_ns != b.due_ns ? a.due_ns > b.due_ns : a.seq > b.seq;
    }
  };

  int64_t DelayFor();
  double Uniform01();
  void Account(const Held& h);

  DelaySpec spec_;
  DelayLineLimits limits_;
  std::mt19937_64 rng_;
  std::vector<Held> held_;  // a min-heap by (due_ns, seq)
  size_t bytes_held_ = 0;
  uint64_t next_seq_ = 0;
  std::optional<uint64_t> highest_out_;  // highest arrival number released
  DelayLineCounters counters_;
};

}  // namespace inca::linkdelay
