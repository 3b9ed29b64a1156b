#include "inca/olaf/fragment.h"
#include "wire/olaf_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

namespace inca::olaf {
namespace {

constexpr dp::TimeNs kMs = dp::kNsPerMs;

UpdateHeader Header(uint32_t worker = 7, uint32_t update = 3) {
  UpdateHeader h;
  h.cluster_id = 5;
  h.worker_id = worker;
  h.model_version = 11;
  h.gen_time_ns = 123'456'789;
  h.merged_count = 1;
  h.update_id = update;
  h.reserved = 0x5A;
  return h;
}

std::vector<std::vector<uint8_t>> Split(size_t n, uint32_t max_payload = kDefaultUpdatePayloadBytes,
                                        UpdateHeader h = Header()) {
  auto f = Fragmenter::Create(max_payload);
  EXPECT_TRUE(f.ok()) << f.status();
  const std::vector<float> v = Ramp(n);
  auto out = f->Update(h, v);
  EXPECT_TRUE(out.ok()) << out.status();
  return *out;
}

// Every fragment handed in is in exactly one bucket.
void ExpectConserved(const Reassembler& r) {
  const ReassemblyCounters& c = r.counters();
  EXPECT_EQ(c.fragments, c.completed_fragments + r.buffered_fragments() + c.discarded_fragments +
                             c.duplicates + c.inconsistent + c.too_large);
  size_t bytes_ok = r.pending_bytes() <= r.options().max_pending_bytes;
  EXPECT_TRUE(bytes_ok);
  EXPECT_LE(r.pending(), r.options().max_pending);
}

FragmentOutcome Feed(Reassembler& r, const std::vector<uint8_t>& d, dp::TimeNs now,
                     AssembledUpdate* out) {
  const OlafPacket p = MustParse(d);
  return r.AddUpdate(p.update, p.payload, now, out);
}

TEST(OlafFragmenterTest, DefaultPayloadFitsA9000ByteMtu) {
  EXPECT_EQ(kDefaultUpdatePayloadBytes, 8932u);
  EXPECT_EQ(kDefaultModelPayloadBytes, 8944u);
  auto f = Fragmenter::Create();
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->elements_per_fragment(), 2233u);
  EXPECT_EQ(f->FragmentCount(0), 0u);
  EXPECT_EQ(f->FragmentCount(2233), 1u);
  EXPECT_EQ(f->FragmentCount(2234), 2u);
  EXPECT_EQ(f->MaxElements(), size_t{65535} * 2233);
}

TEST(OlafFragmenterTest, RejectsBadSizes) {
  EXPECT_FALSE(Fragmenter::Create(0).ok());
  EXPECT_FALSE(Fragmenter::Create(6).ok());
  EXPECT_FALSE(Fragmenter::Create(65504).ok());  // 40 + 65504 > 65507
  EXPECT_TRUE(Fragmenter::Create(65464).ok());
  auto f = Fragmenter::Create(4);
  ASSERT_TRUE(f.ok());
  EXPECT_FALSE(f->Update(Header(), {}).ok());
  std::vector<float> too_many(f->MaxElements() + 1, 1.0f);
  int emitted = 0;
  EXPECT_FALSE(f->ForEachUpdate(Header(), too_many, [&](auto) { ++emitted; }).ok());
  EXPECT_EQ(emitted, 0);
}

TEST(OlafFragmenterTest, OneElement) {
  const auto d = Split(1);
  ASSERT_EQ(d.size(), 1u);
  ASSERT_EQ(d[0].size(), kOlafUpdateHeaderBytes + 4);
  const OlafPacket p = MustParse(d[0]);
  UpdateHeader want = Header();
  want.frag_index = 0;
  want.frag_count = 1;
  want.payload_len = 4;
  EXPECT_EQ(p.update, want);  // every other field copied
}

TEST(OlafFragmenterTest, ExactlyOnePayloadAndOneMore) {
  auto one = Split(2233);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].size(), 9000u - 20 - 8);
  auto two = Split(2234);
  ASSERT_EQ(two.size(), 2u);
  const OlafPacket a = MustParse(two[0]), b = MustParse(two[1]);
  EXPECT_EQ(a.update.payload_len, 8932u);
  EXPECT_EQ(b.update.payload_len, 4u);
  EXPECT_EQ(a.update.frag_count, 2);
  EXPECT_EQ(b.update.frag_index, 1);
  EXPECT_EQ(a.update.update_id, b.update.update_id);
  float last = 0;
  std::memcpy(&last, b.payload.data(), 4);
  EXPECT_EQ(last, 2234.0f);
}

TEST(OlafFragmenterTest, HundredThousandElementsRoundTripInAnyOrder) {
  auto d = Split(100'000);
  ASSERT_EQ(d.size(), 45u);  // ceil(100000 / 2233)
  std::mt19937_64 rng(42);
  std::shuffle(d.begin(), d.end(), rng);
  Reassembler r;
  AssembledUpdate u;
  for (size_t i = 0; i < d.size(); ++i) {
    EXPECT_EQ(Feed(r, d[i], 0, &u),
              i + 1 == d.size() ? FragmentOutcome::kCompleted : FragmentOutcome::kBuffered);
  }
  EXPECT_EQ(u.values, Ramp(100'000));
  EXPECT_EQ(u.worker_id, 7u);
  EXPECT_EQ(u.update_id, 3u);
  EXPECT_EQ(u.cluster_id, 5);
  EXPECT_EQ(u.merged_count, 1u);
  EXPECT_EQ(u.fragment_merged_counts.size(), 45u);
  EXPECT_EQ(r.pending(), 0u);
  EXPECT_EQ(r.pending_bytes(), 0u);
  EXPECT_EQ(r.counters().completed, 1u);
  ExpectConserved(r);
}

TEST(OlafFragmenterTest, ModelsRoundTrip) {
  auto f = Fragmenter::Create(kDefaultModelPayloadBytes);
  ASSERT_TRUE(f.ok());
  ModelHeader h;
  h.cluster_id = kAllClusters;
  h.model_version = 99;
  h.gen_time_ns = 5;
  auto d = f->Model(h, Ramp(5000));
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d->size(), 3u);  // 2236 per fragment
  Reassembler r;
  AssembledModel m;
  std::reverse(d->begin(), d->end());
  for (const auto& x : *d) {
    const OlafPacket p = MustParse(x);
    ASSERT_EQ(p.type, OlafType::kModel);
    r.AddModel(p.model, p.payload, 0, &m);
  }
  EXPECT_EQ(m.model_version, 99u);
  EXPECT_EQ(m.values, Ramp(5000));
  EXPECT_EQ(m.gen_time_ns, 5u);
  ExpectConserved(r);
}

TEST(OlafReassemblerTest, DuplicatesAreIgnoredAndCounted) {
  auto d = Split(3 * 2233);
  Reassembler r;
  AssembledUpdate u;
  EXPECT_EQ(Feed(r, d[1], 0, &u), FragmentOutcome::kBuffered);
  EXPECT_EQ(Feed(r, d[1], 0, &u), FragmentOutcome::kDuplicate);
  EXPECT_EQ(Feed(r, d[0], 0, &u), FragmentOutcome::kBuffered);
  EXPECT_EQ(Feed(r, d[2], 0, &u), FragmentOutcome::kCompleted);
  // A late copy after completion does not start a vector that never completes.
  EXPECT_EQ(Feed(r, d[0], 0, &u), FragmentOutcome::kDuplicate);
  EXPECT_EQ(r.pending(), 0u);
  EXPECT_EQ(r.counters().duplicates, 2u);
  EXPECT_EQ(r.counters().completed, 1u);
  // Single-fragment updates too.
  auto one = Split(10, kDefaultUpdatePayloadBytes, Header(7, 4));
  EXPECT_EQ(Feed(r, one[0], 0, &u), FragmentOutcome::kCompleted);
  EXPECT_EQ(Feed(r, one[0], 0, &u), FragmentOutcome::kDuplicate);
  ExpectConserved(r);
}

TEST(OlafReassemblerTest, MissingFragmentTimesOut) {
  ReassemblerOptions o;
  o.timeout_ns = 100 * kMs;
  Reassembler r(o);
  auto d = Split(3 * 2233);
  AssembledUpdate u;
  EXPECT_EQ(Feed(r, d[0], 0, &u), FragmentOutcome::kBuffered);
  EXPECT_EQ(Feed(r, d[2], 50 * kMs, &u), FragmentOutcome::kBuffered);
  EXPECT_EQ(r.Expire(99 * kMs), 0u);
  EXPECT_EQ(r.pending(), 1u);
  EXPECT_EQ(r.Expire(100 * kMs), 1u);
  EXPECT_EQ(r.pending(), 0u);
  EXPECT_EQ(r.pending_bytes(), 0u);
  EXPECT_EQ(r.counters().timed_out, 1u);
  EXPECT_EQ(r.counters().discarded_fragments, 2u);
  EXPECT_EQ(r.counters().incomplete(), 1u);
  // The late fragment starts a new (hopeless) vector, timed out in turn by
  // the next Add.
  EXPECT_EQ(Feed(r, d[1], 150 * kMs, &u), FragmentOutcome::kBuffered);
  auto other = Split(10, kDefaultUpdatePayloadBytes, Header(8, 1));
  EXPECT_EQ(Feed(r, other[0], 250 * kMs, &u), FragmentOutcome::kCompleted);
  EXPECT_EQ(r.counters().timed_out, 2u);
  ExpectConserved(r);
}

TEST(OlafReassemblerTest, PendingVectorsAreBoundedOldestEvicted) {
  ReassemblerOptions o;
  o.max_pending = 2;
  Reassembler r(o);
  AssembledUpdate u;
  std::vector<std::vector<std::vector<uint8_t>>> ups;
  for (uint32_t id = 0; id < 3; ++id) {
    ups.push_back(Split(2 * 2233, kDefaultUpdatePayloadBytes, Header(7, id)));
    EXPECT_EQ(Feed(r, ups[id][0], id, &u), FragmentOutcome::kBuffered);
    EXPECT_LE(r.pending(), 2u);
  }
  EXPECT_EQ(r.counters().evicted, 1u);  // update 0
  EXPECT_EQ(Feed(r, ups[2][1], 3, &u), FragmentOutcome::kCompleted);
  EXPECT_EQ(u.update_id, 2u);
  EXPECT_EQ(Feed(r, ups[1][1], 3, &u), FragmentOutcome::kCompleted);
  EXPECT_EQ(u.update_id, 1u);
  EXPECT_EQ(Feed(r, ups[0][1], 3, &u), FragmentOutcome::kBuffered);  // its half is gone
  ExpectConserved(r);

  // The byte budget: 3 fragments of 8932 bytes fit in 20000 bytes? No: 2.
  ReassemblerOptions b;
  b.max_pending_bytes = 20'000;
  Reassembler rb(b);
  for (uint32_t id = 0; id < 3; ++id) {
    Feed(rb, ups[id][0], 0, &u);
    EXPECT_LE(rb.pending_bytes(), 20'000u);
  }
  EXPECT_EQ(rb.pending(), 2u);
  EXPECT_EQ(rb.counters().evicted, 1u);
  // A fragment larger than the whole budget is refused.
  ReassemblerOptions tiny;
  tiny.max_pending_bytes = 100;
  Reassembler rt(tiny);
  EXPECT_EQ(Feed(rt, ups[0][0], 0, &u), FragmentOutcome::kTooLarge);
  ExpectConserved(rb);
  ExpectConserved(rt);
}

TEST(OlafReassemblerTest, InconsistentFragmentsAreRejected) {
  Reassembler r;
  AssembledUpdate u;
  auto three = Split(3 * 2233);  // strides of 8932 bytes
  ASSERT_EQ(Feed(r, three[0], 0, &u), FragmentOutcome::kBuffered);
  // Same (worker, update) but 2 fragments.
  auto two = Split(2 * 2233);
  EXPECT_EQ(Feed(r, two[1], 0, &u), FragmentOutcome::kInconsistent);
  // Same frag_count, a middle fragment of another length (smaller stride).
  auto small = Split(3 * 100, 400);
  EXPECT_EQ(Feed(r, small[1], 0, &u), FragmentOutcome::kInconsistent);
  // Another cluster.
  UpdateHeader h = Header();
  h.cluster_id = 6;
  auto other_cluster = Split(3 * 2233, kDefaultUpdatePayloadBytes, h);
  EXPECT_EQ(Feed(r, other_cluster[1], 0, &u), FragmentOutcome::kInconsistent);
  EXPECT_EQ(r.counters().inconsistent, 3u);
  // A last fragment longer than the stride: build by hand.
  Reassembler r2;
  auto big_last = Split(3 * 100, 400);  // stride 400 bytes
  ASSERT_EQ(Feed(r2, big_last[0], 0, &u), FragmentOutcome::kBuffered);
  UpdateHeader lh = MustParse(big_last[2]).update;
  std::vector<uint8_t> payload(800, 0);
  EXPECT_EQ(r2.AddUpdate(lh, payload, 0, &u), FragmentOutcome::kInconsistent);
  // The genuine fragments still complete.
  EXPECT_EQ(Feed(r, three[1], 0, &u), FragmentOutcome::kBuffered);
  EXPECT_EQ(Feed(r, three[2], 0, &u), FragmentOutcome::kCompleted);
  EXPECT_EQ(u.values, Ramp(3 * 2233));
  ExpectConserved(r);
  ExpectConserved(r2);
}

TEST(OlafReassemblerTest, MergedFragmentsReportMinimumAndPerFragmentCounts) {
  Reassembler r;
  AssembledUpdate u;
  auto d = Split(3 * 2233);
  // As an OLAF switch would leave them: fragment 1 carries 3 worker
  // updates and a newer gen_time / model_version.
  OlafPacket p1 = MustParse(d[1]);
  UpdateHeader h1 = p1.update;
  h1.merged_count = 3;
  h1.gen_time_ns += 1000;
  h1.model_version += 2;
  ASSERT_EQ(Feed(r, d[0], 0, &u), FragmentOutcome::kBuffered);
  ASSERT_EQ(r.AddUpdate(h1, p1.payload, 0, &u), FragmentOutcome::kBuffered);
  ASSERT_EQ(Feed(r, d[2], 0, &u), FragmentOutcome::kCompleted);
  EXPECT_EQ(u.merged_count, 1u);
  EXPECT_EQ(u.fragment_merged_counts, (std::vector<uint32_t>{1, 3, 1}));
  EXPECT_EQ(u.gen_time_ns, 123'456'789u + 1000);
  EXPECT_EQ(u.model_version, 13u);
  ExpectConserved(r);
}

TEST(OlafReassemblerTest, WorkersAndUpdatesAreKeptApart) {
  Reassembler r;
  AssembledUpdate u;
  auto a = Split(2 * 2233, kDefaultUpdatePayloadBytes, Header(1, 1));
  auto b = Split(2 * 2233, kDefaultUpdatePayloadBytes, Header(2, 1));
  auto c = Split(2 * 2233, kDefaultUpdatePayloadBytes, Header(1, 2));
  EXPECT_EQ(Feed(r, a[0], 0, &u), FragmentOutcome::kBuffered);
  EXPECT_EQ(Feed(r, b[0], 0, &u), FragmentOutcome::kBuffered);
  EXPECT_EQ(Feed(r, c[1], 0, &u), FragmentOutcome::kBuffered);
  EXPECT_EQ(r.pending(), 3u);
  EXPECT_EQ(Feed(r, b[1], 0, &u), FragmentOutcome::kCompleted);
  EXPECT_EQ(u.worker_id, 2u);
  ExpectConserved(r);
}

}  // namespace
}  // namespace inca::olaf
