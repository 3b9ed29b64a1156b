#include "linkdelay/delay_line.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace inca::linkdelay {

absl::Status DelaySpec::Validate() const {
  if (delay_ns < 0) return absl::InvalidArgumentError("delay must not be negative");
  if (jitter_ns < 0) return absl::InvalidArgumentError("jitter must not be negative");
  if (!(reorder >= 0.0 && reorder <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat("reorder ", reorder, " must be in [0, 1]"));
  }
  if (reorder > 0.0 && delay_ns == 0) {
    return absl::InvalidArgumentError(
        "reorder needs a delay (as netem's: only delayed frames "
        "can be overtaken)");
  }
  return absl::OkStatus();
}

std::string DelayLineCounters::ToJson() const {
  return absl::StrCat("{\"frames_in\":", frames_in, ",\"frames_out\":", frames_out,
                      ",\"bytes_out\":", bytes_out, ",\"dropped_limit\":", dropped_limit,
                      ",\"sent_at_once\":", sent_at_once, ",\"overtaken\":", overtaken,
                      ",\"max_frames_held\":", max_frames_held,
                      ",\"max_bytes_held\":", max_bytes_held, "}");
}

DelayLine::DelayLine(const DelaySpec& spec, const DelayLineLimits& limits, uint64_t seed)
    : spec_(spec), limits_(limits), rng_(seed) {}

double DelayLine::Uniform01() {
  // 53 random bits: the same sequence for a seed on every platform.
  return static_cast<double>(rng_() >> 11) * 0x1.0p-53;
}

int64_t DelayLine::DelayFor() {
  if (spec_.reorder > 0.0 && Uniform01() < spec_.reorder) {
    ++counters_.sent_at_once;
    return 0;
  }
  int64_t d = spec_.delay_ns;
  if (spec_.jitter_ns > 0) {
    d += static_cast<int64_t>(
        std::llround((2.0 * Uniform01() - 1.0) * static_cast<double>(spec_.jitter_ns)));
  }
  return d < 0 ? 0 : d;
}

bool DelayLine::Push(int64_t now_ns, absl::Span<const uint8_t> bytes) {
  Frame f = Frame::Allocate(std::max<size_t>(1, bytes.size()));
  f.len = bytes.size();
  if (!bytes.empty()) std::memcpy(f.data.get(), bytes.data(), f.len);
  return Push(now_ns, f);
}

bool DelayLine::Push(int64_t now_ns, Frame& f) {
  ++counters_.frames_in;
  if (held_.size() >= limits_.max_frames || bytes_held_ + f.len > limits_.max_bytes) {
    ++counters_.dropped_limit;
    return false;
  }
  const size_t len = f.len;
  held_.push_back(Held{now_ns + DelayFor(), next_seq_++, std::move(f)});
  std::push_heap(held_.begin(), held_.end(), Later{});
  bytes_held_ += len;
  counters_.max_frames_held = std::max<uint64_t>(counters_.max_frames_held, held_.size());
  counters_.max_bytes_held = std::max<uint64_t>(counters_.max_bytes_held, bytes_held_);
  return true;
}

std::optional<int64_t> DelayLine::NextDueNs() const {
  if (held_.empty()) return std::nullopt;
  return held_.front().due_ns;
}

size_t DelayLine::ReleaseDue(int64_t now_ns, size_t max_frames, std::vector<Frame>& out) {
  size_t n = 0;
  while (n < max_frames && !held_.empty() && held_.front().due_ns <= now_ns) {
    std::pop_heap(held_.begin(), held_.end(), Later{});
    Held h = std::move(held_.back());
    held_.pop_back();
    Account(h);
    out.push_back(std::move(h.frame));
    ++n;
  }
  return n;
}

void DelayLine::Account(const Held& h) {
  ++counters_.frames_out;
  counters_.bytes_out += h.frame.len;
  bytes_held_ -= h.frame.len;
  if (highest_out_ && h.seq < *highest_out_) {
    ++counters_.overtaken;
  } else {
    highest_out_ = h.seq;
  }
}

}  // namespace inca::linkdelay
