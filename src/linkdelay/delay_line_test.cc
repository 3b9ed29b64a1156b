#include "linkdelay/delay_line.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace inca::linkdelay {
namespace {

constexpr int64_t kMs = 1'000'000;

std::vector<uint8_t> Bytes(uint32_t id, size_t size = 64) {
  std::vector<uint8_t> f(size, 0);
  for (int i = 0; i < 4; ++i) f[i] = static_cast<uint8_t>(id >> (8 * i));
  return f;
}

uint32_t IdOf(const Frame& f) {
  const uint8_t* d = f.data.get();
  return uint32_t{d[0]} | uint32_t{d[1]} << 8 | uint32_t{d[2]} << 16 | uint32_t{d[3]} << 24;
}

// Releases what is due into `ids` (when given); returns how many.
size_t Release(DelayLine& line, int64_t now, size_t max, std::vector<uint32_t>* ids = nullptr) {
  std::vector<Frame> out;
  const size_t n = line.ReleaseDue(now, max, out);
  EXPECT_EQ(out.size(), n);
  for (const Frame& f : out) {
    if (ids != nullptr) ids->push_back(IdOf(f));
  }
  return n;
}

struct Out {
  int64_t at_ns;
  uint32_t id;
};

// Pushes `n` frames one every `gap_ns`, releasing after every push and then at
// 1 us steps until empty; returns what left, when.
std::vector<Out> Drive(DelayLine& line, int n, int64_t gap_ns) {
  std::vector<Out> out;
  int64_t now = 0;
  auto release = [&] {
    std::vector<uint32_t> ids;
    Release(line, now, 1 << 20, &ids);
    for (uint32_t id : ids) out.push_back({now, id});
  };
  for (int i = 0; i < n; ++i, now += gap_ns) {
    line.Push(now, Bytes(static_cast<uint32_t>(i)));
    release();
  }
  for (int guard = 0; line.frames_held() > 0 && guard < 10'000'000; ++guard) {
    now = *line.NextDueNs();
    release();
  }
  return out;
}

TEST(DelayLineTest, AFixedDelayHoldsEveryFrameThatLongInOrder) {
  DelayLine line(DelaySpec{2 * kMs, 0, 0.0}, DelayLineLimits{}, 1);
  const std::vector<Out> out = Drive(line, 100, 100'000);
  ASSERT_EQ(out.size(), 100u);
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i].id, i);
    EXPECT_EQ(out[i].at_ns, static_cast<int64_t>(i) * 100'000 + 2 * kMs);
  }
  EXPECT_EQ(line.counters().overtaken, 0u);
  EXPECT_EQ(line.counters().frames_out, 100u);
}

TEST(DelayLineTest, JitterWiderThanTheGapReordersWithinItsBounds) {
  // 2 ms +- 1 ms at one frame per 100 us: netem's "delay 2ms 1ms".
  DelayLine line(DelaySpec{2 * kMs, 1 * kMs, 0.0}, DelayLineLimits{}, 7);
  const int n = 5000;
  const std::vector<Out> out = Drive(line, n, 100'000);
  ASSERT_EQ(out.size(), static_cast<size_t>(n));
  std::vector<int> seen(n, 0);
  double sum_ms = 0;
  for (const Out& o : out) {
    const int64_t held = o.at_ns - static_cast<int64_t>(o.id) * 100'000;
    EXPECT_GE(held, 1 * kMs);
    EXPECT_LE(held, 3 * kMs);
    sum_ms += static_cast<double>(held) / kMs;
    ++seen[o.id];
  }
  for (int c : seen) EXPECT_EQ(c, 1);  // nothing lost or duplicated
  EXPECT_NEAR(sum_ms / n, 2.0, 0.05);  // uniform: mean at the delay
  // Most frames are overtaken by a later one: the jitter spans 20 gaps.
  EXPECT_GT(line.counters().overtaken, static_cast<uint64_t>(n / 2));
}

TEST(DelayLineTest, TheSameSeedDrawsTheSameDelays) {
  DelayLine a(DelaySpec{2 * kMs, 1 * kMs, 0.1}, DelayLineLimits{}, 42);
  DelayLine b(DelaySpec{2 * kMs, 1 * kMs, 0.1}, DelayLineLimits{}, 42);
  DelayLine c(DelaySpec{2 * kMs, 1 * kMs, 0.1}, DelayLineLimits{}, 43);
  const auto oa = Drive(a, 500, 100'000), ob = Drive(b, 500, 100'000), oc = Drive(c, 500, 100'000);
  ASSERT_EQ(oa.size(), ob.size());
  bool differs = false;
  for (size_t i = 0; i < oa.size(); ++i) {
    EXPECT_EQ(oa[i].id, ob[i].id);
    EXPECT_EQ(oa[i].at_ns, ob[i].at_ns);
    differs |= oa[i].id != oc[i].id || oa[i].at_ns != oc[i].at_ns;
  }
  EXPECT_TRUE(differs);
}

TEST(DelayLineTest, ReorderSendsThatFractionAtOnceAheadOfTheHeld) {
  DelayLine line(DelaySpec{5 * kMs, 0, 0.25}, DelayLineLimits{}, 3);
  const int n = 4000;
  const std::vector<Out> out = Drive(line, n, 100'000);
  ASSERT_EQ(out.size(), static_cast<size_t>(n));
  const uint64_t at_once = line.counters().sent_at_once;
  EXPECT_GT(at_once, 900u);  // 25 % of 4000 is 1000, +-6 sigma
  EXPECT_LT(at_once, 1100u);
  size_t immediate = 0;
  for (const Out& o : out) immediate += o.at_ns == static_cast<int64_t>(o.id) * 100'000;
  EXPECT_EQ(immediate, at_once);
  EXPECT_GT(line.counters().overtaken, 0u);
}

TEST(DelayLineTest, AFullLineDropsAndCountsEveryFrameBeyondItsLimits) {
  DelayLine by_frames(DelaySpec{10 * kMs, 0, 0.0}, DelayLineLimits{8, 1 << 20}, 1);
  DelayLine by_bytes(DelaySpec{10 * kMs, 0, 0.0}, DelayLineLimits{1000, 1000}, 1);
  int kept_frames = 0, kept_bytes = 0;
  for (uint32_t i = 0; i < 20; ++i) {
    kept_frames += by_frames.Push(0, Bytes(i));
    kept_bytes += by_bytes.Push(0, Bytes(i, 300));
  }
  EXPECT_EQ(kept_frames, 8);
  EXPECT_EQ(by_frames.counters().dropped_limit, 12u);
  EXPECT_EQ(kept_bytes, 3);  // 3 x 300 <= 1000 < 4 x 300
  EXPECT_EQ(by_bytes.counters().dropped_limit, 17u);
  EXPECT_EQ(by_bytes.bytes_held(), 900u);
  EXPECT_EQ(by_bytes.counters().max_bytes_held, 900u);
  // Nothing is due early; all are due at 10 ms; then the line is empty.
  EXPECT_EQ(Release(by_frames, 10 * kMs - 1, 100), 0u);
  EXPECT_EQ(Release(by_frames, 10 * kMs, 100), 8u);
  EXPECT_FALSE(by_frames.NextDueNs().has_value());
  const DelayLineCounters& c = by_frames.counters();
  EXPECT_EQ(c.frames_in, c.frames_out + c.dropped_limit);
}

TEST(DelayLineTest, ReleaseStopsAtTheCallersBatch) {
  DelayLine line(DelaySpec{1 * kMs, 0, 0.0}, DelayLineLimits{}, 1);
  for (uint32_t i = 0; i < 10; ++i) line.Push(0, Bytes(i));
  std::vector<uint32_t> ids;
  EXPECT_EQ(Release(line, kMs, 4, &ids), 4u);
  EXPECT_EQ(Release(line, kMs, 100, &ids), 6u);
  EXPECT_EQ(ids, (std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(DelaySpecTest, BadSpecsAreRefusedWithAReason) {
  EXPECT_FALSE((DelaySpec{-1, 0, 0.0}).Validate().ok());
  EXPECT_FALSE((DelaySpec{kMs, -1, 0.0}).Validate().ok());
  EXPECT_FALSE((DelaySpec{kMs, 0, 1.5}).Validate().ok());
  const absl::Status s = DelaySpec{0, 0, 0.5}.Validate();
  EXPECT_NE(s.message().find("reorder needs a delay"), absl::string_view::npos) << s;
  EXPECT_TRUE((DelaySpec{2 * kMs, kMs, 0.25}).Validate().ok());
}

}  // namespace
}  // namespace inca::linkdelay
