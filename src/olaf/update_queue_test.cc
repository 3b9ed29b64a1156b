#include "inca/olaf/update_queue.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <vector>

namespace inca::olaf {
namespace {

using dp::TimeNs;
using ::testing::ElementsAre;

std::vector<uint8_t> F32(const std::vector<float>& xs) {
  std::vector<uint8_t> b(xs.size() * 4);
  if (!xs.empty()) std::memcpy(b.data(), xs.data(), b.size());
  return b;
}

std::vector<float> AsF32(std::span<const uint8_t> b) {
  std::vector<float> v(b.size() / 4);
  if (!v.empty()) std::memcpy(v.data(), b.data(), v.size() * 4);
  return v;
}

struct Out {
  UpdateHeader header;
  std::vector<float> payload;
};

class QueueTest : public ::testing::Test {
 protected:
  void Make(QueuePolicy policy, QueueConfig c = {}) {
    c.max_payload_bytes = std::min<uint32_t>(c.max_payload_bytes, 256);
    auto q = UpdateQueue::Create(policy, c);
    ASSERT_TRUE(q.ok()) << q.status();
    q_ = *std::move(q);
    buf_.assign(kOlafUpdateHeaderBytes + q_->config().max_payload_bytes, 0);
  }
  // Conservation holds after every test, in total and per cluster.
  void TearDown() override {
    if (!q_) return;
    EXPECT_TRUE(q_->totals().Conserved());
    uint64_t occupancy = 0;
    for (uint16_t c : q_->Clusters()) {
      EXPECT_TRUE(q_->cluster(c)->Conserved()) << "cluster " << c;
      occupancy += q_->cluster(c)->occupancy;
    }
    EXPECT_EQ(occupancy, q_->occupancy());
    EXPECT_LE(q_->occupancy(), q_->config().depth);
  }

  EnqueueResult Offer(uint16_t cluster, TimeNs now, std::vector<float> payload = {1.0f},
                      uint32_t update_id = 0, uint64_t gen = kGenIsNow, uint16_t frag_index = 0,
                      uint16_t frag_count = 1) {
    UpdateHeader h;
    h.cluster_id = cluster;
    h.worker_id = 1000u + cluster;
    h.update_id = update_id;
    h.gen_time_ns = gen == kGenIsNow ? static_cast<uint64_t>(now) : gen;
    h.frag_index = frag_index;
    h.frag_count = frag_count;
    const auto bytes = F32(payload);
    h.payload_len = static_cast<uint32_t>(bytes.size());
    return q_->Enqueue(h, bytes, now);
  }
  std::optional<Out> Take(TimeNs now) {
    UpdateHeader h;
    const size_t n = q_->Dequeue(now, buf_, &h);
    if (n == 0) return std::nullopt;
    OlafPacket p;
    EXPECT_EQ(ParseOlaf(std::span<const uint8_t>(buf_.data(), n), &p), OlafParseError::kOk);
    EXPECT_EQ(p.update, h);
    return Out{h, AsF32(p.payload)};
  }
  std::vector<uint16_t> DrainClusters(TimeNs now) {
    std::vector<uint16_t> order;
    while (auto o = Take(now)) order.push_back(o->header.cluster_id);
    return order;
  }

  static constexpr uint64_t kGenIsNow = ~uint64_t{0};
  std::unique_ptr<UpdateQueue> q_;
  std::vector<uint8_t> buf_;
};

TEST_F(QueueTest, ConfigValidation) {
  QueueConfig c;
  EXPECT_TRUE(c.Validate().ok());
  c.depth = 0;
  EXPECT_THAT(std::string(c.Validate().message()), ::testing::HasSubstr("depth"));
  c = {};
  c.max_payload_bytes = 6;
  EXPECT_THAT(std::string(c.Validate().message()), ::testing::HasSubstr("max_payload_bytes"));
  c = {};
  c.tau_ns = 0;
  EXPECT_THAT(std::string(c.Validate().message()), ::testing::HasSubstr("tau_ns"));
  c = {};
  c.delta_t_ns = -1;
  EXPECT_THAT(std::string(c.Validate().message()), ::testing::HasSubstr("delta_t_ns"));
  c = {};
  c.max_clusters = 0;
  EXPECT_THAT(std::string(c.Validate().message()), ::testing::HasSubstr("max_clusters"));
  EXPECT_FALSE(UpdateQueue::Create(QueuePolicy::kOlaf, c).ok());
  EXPECT_EQ(ParseQueuePolicy("olaf"), QueuePolicy::kOlaf);
  EXPECT_EQ(ParseQueuePolicy("fifo"), QueuePolicy::kFifo);
  EXPECT_FALSE(ParseQueuePolicy("red").has_value());
}

TEST_F(QueueTest, FifoTailDropsAndKeepsArrivalOrder) {
  QueueConfig c;
  c.depth = 3;
  Make(QueuePolicy::kFifo, c);
  for (uint32_t i = 0; i < 5; ++i) {
    const auto r = Offer(static_cast<uint16_t>(i % 2), 10, {static_cast<float>(i)}, i);
    EXPECT_EQ(r.action, i < 3 ? EnqueueAction::kEnqueued : EnqueueAction::kDropped) << i;
    if (i >= 3) {
      EXPECT_EQ(r.reason, dp::DropReason::kQueueFull);
    }
  }
  EXPECT_EQ(q_->totals().drops(dp::DropReason::kQueueFull), 2u);
  EXPECT_EQ(q_->totals().merged, 0u);
  EXPECT_EQ(q_->queue_util(), kQueueUtilOne);
  std::vector<uint32_t> ids;
  while (auto o = Take(20)) ids.push_back(o->header.update_id);
  EXPECT_THAT(ids, ElementsAre(0, 1, 2));
  EXPECT_EQ(q_->queue_util(), 0u);
  // No eviction in FIFO, however old.
  Offer(0, 30, {1.0f}, 9, 0);
  EXPECT_TRUE(Take(30 + 10 * 400 * dp::kNsPerMs).has_value());
  EXPECT_EQ(q_->totals().evictions(), 0u);
}

TEST_F(QueueTest, MergeArithmeticIsExact) {
  QueueConfig c;
  c.depth = 1;
  c.tau_ns = 1000;
  Make(QueuePolicy::kOlaf, c);
  std::vector<float> a(19), b(19);  // two blocks of 8 plus a scalar tail
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<float>(i) + 0.25f;
    b[i] = -3.0f * static_cast<float>(i) + 1.0f;
  }
  UpdateHeader h1;
  h1.cluster_id = 4;
  h1.worker_id = 11;
  h1.update_id = 5;
  h1.model_version = 7;
  h1.gen_time_ns = 90;
  h1.merged_count = 2;
  const auto pa = F32(a);
  h1.payload_len = static_cast<uint32_t>(pa.size());
  ASSERT_EQ(q_->Enqueue(h1, pa, 100).action, EnqueueAction::kEnqueued);
  UpdateHeader h2 = h1;
  h2.worker_id = 12;
  h2.update_id = 6;
  h2.model_version = 6;
  h2.gen_time_ns = 550;
  h2.merged_count = 3;
  ASSERT_EQ(q_->Enqueue(h2, F32(b), 600).action, EnqueueAction::kMerged);

  const auto alpha = static_cast<float>(std::exp(-500.0 / 1000.0));
  auto o = Take(700);
  ASSERT_TRUE(o.has_value());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(o->payload[i], alpha * a[i] + (1.0f - alpha) * b[i]) << i;
  }
  EXPECT_EQ(o->header.merged_count, 5u);
  EXPECT_EQ(o->header.gen_time_ns, 550u);
  EXPECT_EQ(o->header.model_version, 7u);
  EXPECT_EQ(o->header.worker_id, 11u);
  EXPECT_EQ(o->header.update_id, 5u);
  EXPECT_EQ(q_->totals().merged, 1u);
  EXPECT_EQ(q_->totals().dequeued_worker_updates, 5u);
  EXPECT_EQ(q_->cluster(4)->merged, 1u);
}

TEST_F(QueueTest, MergeUsesEnqueueTimeAndMatchesFragmentAndLength) {
  QueueConfig c;
  c.depth = 2;
  c.tau_ns = 100;
  Make(QueuePolicy::kOlaf, c);
  // One cluster: cap 2. Fragment 0/2 and 1/2 of one update.
  ASSERT_EQ(Offer(1, 0, {10.0f}, 1, 0, 0, 2).action, EnqueueAction::kEnqueued);
  ASSERT_EQ(Offer(1, 0, {20.0f}, 1, 0, 1, 2).action, EnqueueAction::kEnqueued);
  // Fragment 1/2 of the next update merges into fragment 1/2, twice; alpha
  // is measured from the entry's enqueue time (0) both times.
  ASSERT_EQ(Offer(1, 50, {40.0f}, 2, 50, 1, 2).action, EnqueueAction::kMerged);
  ASSERT_EQ(Offer(1, 100, {80.0f}, 3, 100, 1, 2).action, EnqueueAction::kMerged);
  // A different length or fragment shape has nothing to merge with.
  EXPECT_EQ(Offer(1, 100, {1.0f, 2.0f}, 4, 100, 1, 2).reason, dp::DropReason::kQueueFull);
  EXPECT_EQ(Offer(1, 100, {1.0f}, 4, 100, 0, 3).reason, dp::DropReason::kQueueFull);
  const float a1 = static_cast<float>(std::exp(-0.5));
  const float a2 = static_cast<float>(std::exp(-1.0));
  const float want = a2 * (a1 * 20.0f + (1.0f - a1) * 40.0f) + (1.0f - a2) * 80.0f;
  auto f0 = Take(100);
  auto f1 = Take(100);
  ASSERT_TRUE(f0 && f1);
  EXPECT_EQ(f0->payload[0], 10.0f);
  EXPECT_EQ(f1->payload[0], want);
  EXPECT_EQ(f1->header.merged_count, 3u);
  EXPECT_EQ(f1->header.update_id, 1u);
}

TEST_F(QueueTest, StaleEntriesAreEvictedLazily) {
  QueueConfig c;
  c.delta_t_ns = 100;
  Make(QueuePolicy::kOlaf, c);
  ASSERT_EQ(Offer(1, 0).action, EnqueueAction::kEnqueued);
  ASSERT_EQ(Offer(2, 50).action, EnqueueAction::kEnqueued);
  q_->Expire(99);
  EXPECT_EQ(q_->occupancy(), 2u);
  // At 100 cluster 1's entry (queued at 0) is stale: queued_at + ΔT <= now.
  auto o = Take(100);
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->header.cluster_id, 2);
  EXPECT_EQ(q_->cluster(1)->drops(dp::DropReason::kStaleEvicted), 1u);
  // Eviction on arrival too.
  ASSERT_EQ(Offer(3, 200).action, EnqueueAction::kEnqueued);
  ASSERT_EQ(Offer(4, 300).action, EnqueueAction::kEnqueued);
  EXPECT_EQ(q_->cluster(3)->drops(dp::DropReason::kStaleEvicted), 1u);
  EXPECT_EQ(q_->occupancy(), 1u);
  EXPECT_EQ(q_->totals().evictions(), 2u);
}

TEST_F(QueueTest, StaleOnArrival) {
  QueueConfig c;
  c.delta_t_ns = 100;
  Make(QueuePolicy::kOlaf, c);
  EXPECT_EQ(Offer(1, 1000, {1.0f}, 0, 900).reason, dp::DropReason::kStaleOnArrival);
  EXPECT_EQ(Offer(1, 1000, {1.0f}, 0, 901).action, EnqueueAction::kEnqueued);
  // A generation time in the future (clock skew) has age 0.
  EXPECT_EQ(Offer(1, 1000, {1.0f}, 0, 5000).action, EnqueueAction::kEnqueued);
  EXPECT_EQ(q_->cluster(1)->drops(dp::DropReason::kStaleOnArrival), 1u);
  // FIFO has no staleness rule.
  Make(QueuePolicy::kFifo, c);
  EXPECT_EQ(Offer(1, 1000, {1.0f}, 0, 0).action, EnqueueAction::kEnqueued);
}

TEST_F(QueueTest, PerClusterCapFollowsActiveClusters) {
  QueueConfig c;
  c.depth = 8;
  c.delta_t_ns = 1000;
  Make(QueuePolicy::kOlaf, c);
  auto* olaf = static_cast<OlafQueue*>(q_.get());
  ASSERT_EQ(Offer(2, 0).action, EnqueueAction::kEnqueued);
  EXPECT_EQ(olaf->ClusterCap(0), 8u);
  ASSERT_EQ(Offer(1, 0).action, EnqueueAction::kEnqueued);
  EXPECT_EQ(q_->ActiveClusters(0), 2u);
  EXPECT_EQ(olaf->ClusterCap(0), 4u);
  // Cluster 1 takes fragments 1..3 of a 8-fragment update (4 entries).
  for (uint16_t f = 1; f < 4; ++f) {
    ASSERT_EQ(Offer(1, 0, {1.0f}, 0, 0, f, 8).action, EnqueueAction::kEnqueued) << f;
  }
  // A fifth entry exceeds the cap: no matching fragment -> cluster_cap.
  EXPECT_EQ(Offer(1, 0, {1.0f}, 0, 0, 4, 8).reason, dp::DropReason::kClusterCap);
  // A matching fragment merges instead.
  EXPECT_EQ(Offer(1, 0, {1.0f}, 0, 0, 3, 8).action, EnqueueAction::kMerged);
  EXPECT_EQ(q_->cluster(1)->occupancy, 4u);
  // Cluster 2 stopped sending: once ΔT has passed (its entry is evicted and
  // it has not been seen) cluster 1 is alone and the cap is 8 again.
  EXPECT_EQ(q_->ActiveClusters(999), 2u);
  q_->Expire(1000);
  EXPECT_EQ(q_->ActiveClusters(1000), 0u);
  EXPECT_EQ(olaf->ClusterCap(1000), 8u);
}

TEST_F(QueueTest, NewClusterDisplacesTheLargestCluster) {
  QueueConfig c;
  c.depth = 2;
  Make(QueuePolicy::kOlaf, c);
  ASSERT_EQ(Offer(1, 0, {1.0f}, 10).action, EnqueueAction::kEnqueued);
  ASSERT_EQ(Offer(1, 1, {1.0f}, 11, kGenIsNow, 0, 2).action, EnqueueAction::kEnqueued);
  ASSERT_EQ(Offer(2, 2, {1.0f}, 20).action, EnqueueAction::kEnqueued);
  EXPECT_EQ(q_->cluster(1)->drops(dp::DropReason::kDisplaced), 1u);
  EXPECT_EQ(q_->totals().drops(dp::DropReason::kDisplaced), 1u);
  // The oldest entry of cluster 1 went; its newer one stays.
  auto a = Take(3);
  auto b = Take(3);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->header.update_id, 11u);
  EXPECT_EQ(b->header.update_id, 20u);
}

TEST_F(QueueTest, DisplacementTieBreaksOnSmallestAom) {
  QueueConfig c;
  c.depth = 2;
  Make(QueuePolicy::kOlaf, c);
  // Clusters 1 and 2 have each been served once: 1 with gen 100, 2 with
  // gen 50, so cluster 1 has the smaller AoM.
  Offer(2, 50);
  Offer(1, 100);
  EXPECT_THAT(DrainClusters(100), ElementsAre(1, 2));
  Offer(1, 200);
  Offer(2, 200);
  ASSERT_EQ(Offer(3, 200).action, EnqueueAction::kEnqueued);
  EXPECT_EQ(q_->cluster(1)->drops(dp::DropReason::kDisplaced), 1u);
  EXPECT_EQ(q_->cluster(2)->drops(dp::DropReason::kDisplaced), 0u);
}

TEST_F(QueueTest, DequeueServesLargestAomThenLowestIdFifoWithinCluster) {
  Make(QueuePolicy::kOlaf);
  // Never served: infinite AoM, ties by lowest id.
  Offer(5, 0, {1.0f}, 50);
  Offer(3, 0, {1.0f}, 30);
  Offer(9, 0, {1.0f}, 90);
  Offer(3, 0, {1.0f}, 31, kGenIsNow, 0, 2);
  std::vector<uint32_t> ids;
  while (auto o = Take(10)) ids.push_back(o->header.update_id);
  // After its first dequeue cluster 3's AoM is finite, so 5 and 9 (never
  // served) go before its second entry.
  EXPECT_THAT(ids, ElementsAre(30, 50, 90, 31));
  // All three have now been served gen 0: equal AoM, lowest id first.
  Offer(9, 20, {1.0f}, 91, 5);
  Offer(5, 20, {1.0f}, 51, 15);
  Offer(3, 20, {1.0f}, 32, 15);
  EXPECT_THAT(DrainClusters(30), ElementsAre(3, 5, 9));
  // Freshest served gens: 9 -> 5, 3 -> 15, 5 -> 15. 9 has the largest AoM.
  Offer(3, 40);
  Offer(5, 40);
  Offer(9, 40);
  EXPECT_THAT(DrainClusters(40), ElementsAre(9, 3, 5));
}

TEST_F(QueueTest, RejectsTooLargeAndTooManyClusters) {
  QueueConfig c;
  c.max_payload_bytes = 8;
  c.max_clusters = 2;
  Make(QueuePolicy::kOlaf, c);
  EXPECT_EQ(Offer(1, 0, {1, 2, 3}).reason, dp::DropReason::kPayloadTooLarge);
  EXPECT_EQ(Offer(1, 0, {1, 2}).action, EnqueueAction::kEnqueued);
  EXPECT_EQ(Offer(2, 0).action, EnqueueAction::kEnqueued);
  EXPECT_EQ(Offer(3, 0).reason, dp::DropReason::kClustersExhausted);
  EXPECT_EQ(Offer(kUnassignedCluster, 0).reason, dp::DropReason::kClustersExhausted);
  EXPECT_EQ(q_->cluster(3), nullptr);
  EXPECT_EQ(q_->totals().drops(dp::DropReason::kClustersExhausted), 2u);
}

// Seed 4.1 shape: depth 8 < 9 clusters. Cluster 0 floods (5 updates per
// period), the others send one each; one update leaves per period. OLAF
// keeps every cluster's share of the link equal; FIFO gives the flooder its
// arrival share.
std::map<uint16_t, uint64_t> RunFlood(QueuePolicy policy) {
  QueueConfig c;
  c.depth = 8;
  c.max_payload_bytes = 16;
  auto q = *UpdateQueue::Create(policy, c);
  std::vector<uint8_t> buf(kOlafUpdateHeaderBytes + 16);
  const auto payload = F32({1.0f});
  std::map<uint16_t, uint64_t> served;
  for (TimeNs t = 1; t <= 900; ++t) {
    for (int i = 0; i < 13; ++i) {
      const int k = static_cast<int>((i + t) % 13);  // rotate who arrives first
      UpdateHeader h;
      h.cluster_id = static_cast<uint16_t>(k < 5 ? 0 : k - 4);
      h.gen_time_ns = static_cast<uint64_t>(t * 1000);
      h.payload_len = 4;
      q->Enqueue(h, payload, t * 1000);
    }
    UpdateHeader out;
    if (q->Dequeue(t * 1000, buf, &out) > 0) ++served[out.cluster_id];
    EXPECT_TRUE(q->totals().Conserved());
  }
  return served;
}

TEST(QueueFairnessTest, FloodingClusterCannotStarveOthers) {
  const auto olaf = RunFlood(QueuePolicy::kOlaf);
  ASSERT_EQ(olaf.size(), 9u);
  for (const auto& [cluster, n] : olaf) {
    EXPECT_GE(n, 95u) << "cluster " << cluster;
    EXPECT_LE(n, 105u) << "cluster " << cluster;
  }
  const auto fifo = RunFlood(QueuePolicy::kFifo);
  // FIFO: the flooder takes far more than 1/9 of the link.
  EXPECT_GT(fifo.at(0), 2 * fifo.at(1));
}

TEST(MergeKernelTest, MatchesScalarFormulaForEveryLength) {
  for (size_t n = 0; n < 40; ++n) {
    std::vector<float> q(n), x(n);
    for (size_t i = 0; i < n; ++i) {
      q[i] = static_cast<float>(i) * 0.5f;
      x[i] = 100.0f - static_cast<float>(i);
    }
    std::vector<uint8_t> src(n * 4 + 1);  // unaligned source
    if (n) std::memcpy(src.data() + 1, x.data(), n * 4);
    auto want = q;
    for (size_t i = 0; i < n; ++i) want[i] = 0.75f * q[i] + 0.25f * x[i];
    MergeF32(q.data(), src.data() + 1, n, 0.75f);
    EXPECT_EQ(q, want) << n;
  }
}

// Issue 20, item 6: ΔT, τ and depth change at run time; depth only within
// the storage allocated at Create.
TEST_F(QueueTest, RunTimeParamsChangeDepthWithinCapacityAndDeltaT) {
  for (QueuePolicy policy : {QueuePolicy::kFifo, QueuePolicy::kOlaf}) {
    SCOPED_TRACE(ToString(policy));
    QueueConfig c;
    c.depth = 4;
    Make(policy, c);
    EXPECT_EQ(q_->capacity(), 4u);
    for (uint32_t i = 0; i < 3; ++i)
      ASSERT_EQ(Offer(1, 0, {1.0f}, i).action, EnqueueAction::kEnqueued);
    // A cut below the occupancy evicts nothing; new entries wait for room.
    ASSERT_TRUE(q_->SetRunTimeParams(200 * dp::kNsPerMs, 50 * dp::kNsPerMs, 2).ok());
    EXPECT_EQ(q_->occupancy(), 3u);
    EXPECT_EQ(q_->queue_util(), kQueueUtilOne);  // clamped, not 1.5
    // FIFO tail-drops; OLAF merges into the cluster's entries (no room).
    EXPECT_EQ(Offer(1, 0, {1.0f}, 9).action,
              policy == QueuePolicy::kFifo ? EnqueueAction::kDropped : EnqueueAction::kMerged);
    EXPECT_EQ(q_->occupancy(), 3u);
    EXPECT_EQ(q_->config().depth, 2u);
    EXPECT_EQ(q_->config().delta_t_ns, 200 * dp::kNsPerMs);
    // More than the storage, or invalid: refused, nothing changed.
    EXPECT_EQ(q_->SetRunTimeParams(200 * dp::kNsPerMs, 50 * dp::kNsPerMs, 5).code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(q_->SetRunTimeParams(0, 50 * dp::kNsPerMs, 3).code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(q_->config().depth, 2u);
    // Back up to the capacity: the FIFO ring (sized by capacity) wraps right.
    ASSERT_TRUE(q_->SetRunTimeParams(200 * dp::kNsPerMs, 50 * dp::kNsPerMs, 4).ok());
    std::vector<uint32_t> ids;
    for (uint32_t i = 10; i < 16; ++i) {
      if (auto o = Take(1)) ids.push_back(o->header.update_id);
      (void)Offer(1, 1, {1.0f}, i);
    }
    while (auto o = Take(2)) ids.push_back(o->header.update_id);
    if (policy == QueuePolicy::kFifo) {
      EXPECT_THAT(ids, ElementsAre(0, 1, 2, 10, 11, 12, 13, 14, 15));
    }
    EXPECT_TRUE(q_->empty());
  }
}

TEST_F(QueueTest, RunTimeDeltaTGovernsEviction) {
  QueueConfig c;
  c.depth = 4;
  Make(QueuePolicy::kOlaf, c);
  ASSERT_EQ(Offer(1, 0).action, EnqueueAction::kEnqueued);
  ASSERT_TRUE(q_->SetRunTimeParams(100 * dp::kNsPerMs, c.tau_ns, 4).ok());
  q_->Expire(100 * dp::kNsPerMs);  // queued at 0, ΔT now 100 ms: stale
  EXPECT_EQ(q_->totals().drops(dp::DropReason::kStaleEvicted), 1u);
}

TEST_F(QueueTest, MeanOfferIntervalIsTheClustersObservedPeriod) {
  Make(QueuePolicy::kOlaf);
  EXPECT_FALSE(q_->MeanOfferIntervalNs(1, 0).has_value());
  for (int k = 0; k < 3; ++k) (void)Offer(1, k * 10 * dp::kNsPerMs);
  EXPECT_FALSE(q_->MeanOfferIntervalNs(1, 20 * dp::kNsPerMs).has_value());  // 3: too few
  (void)Offer(1, 30 * dp::kNsPerMs);
  ASSERT_TRUE(q_->MeanOfferIntervalNs(1, 30 * dp::kNsPerMs).has_value());
  EXPECT_NEAR(*q_->MeanOfferIntervalNs(1, 30 * dp::kNsPerMs), 10e6, 1);
  // One long gap moves the average by 1/8 of the difference.
  (void)Offer(1, 120 * dp::kNsPerMs);
  const double mean = 10e6 + (90e6 - 10e6) / 8;
  EXPECT_NEAR(*q_->MeanOfferIntervalNs(1, 120 * dp::kNsPerMs), mean, 1);
  // Quiet for longer than max(ΔT 400 ms, 8 intervals): no current period.
  EXPECT_TRUE(q_->MeanOfferIntervalNs(1, 520 * dp::kNsPerMs).has_value());
  EXPECT_FALSE(q_->MeanOfferIntervalNs(1, 521 * dp::kNsPerMs).has_value());
  while (Take(130 * dp::kNsPerMs)) {
  }
}

}  // namespace
}  // namespace inca::olaf
