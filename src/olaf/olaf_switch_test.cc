#include "inca/olaf/olaf_switch.h"
#include "wire/olaf_test_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace inca::olaf {
namespace {

using dp::DropReason;
using dp::PortId;
using dp::TimeNs;
using dp::Verdict;
using ::testing::ElementsAre;

struct Sent {
  PortId port;
  std::vector<uint8_t> bytes;
};

struct CaptureSink final : dp::PacketSink {
  std::vector<Sent> got;
  void Emit(PortId port, std::span<const uint8_t> p) override {
    got.push_back({port, std::vector<uint8_t>(p.begin(), p.end())});
  }
  std::vector<Sent> Take() { return std::exchange(got, {}); }
};

std::vector<uint8_t> Ack(uint32_t worker, uint32_t util = 0, uint16_t active = 0) {
  AckHeader a;
  a.worker_id = worker;
  a.update_id = 77;
  a.model_version = 12;
  a.aom_us = 3456;
  a.cluster_id = 1;
  a.queue_util = util;
  a.active_clusters = active;
  std::vector<uint8_t> d(kOlafAckBytes);
  SerializeAck(a, d);
  return d;
}

// A worker-side flow: 10.0.0.<host>:<sport> -> 10.0.0.100:9500.
FlowKey Flow(uint8_t host, uint16_t sport) {
  return FlowKey::V4(0x0A000000u | host, 0x0A000064u, sport, 9500);
}

class SwitchTest : public ::testing::Test {
 protected:
  std::unique_ptr<OlafSwitch> MakeSwitch(OlafSwitchConfig c) {
    auto s = OlafSwitch::Create(c);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : nullptr;
  }
  void Make(OlafSwitchConfig c = Defaults()) {
    if (sw_) extra_.push_back(std::move(sw_));  // keep it alive for TearDown's checks
    sw_ = MakeSwitch(c);
    ASSERT_NE(sw_, nullptr);
    all_.push_back(sw_.get());
  }
  static OlafSwitchConfig Defaults() {
    OlafSwitchConfig c;
    c.max_payload_bytes = 256;
    c.egress_rate_bps = 8'000'000'000;  // 1 byte/ns
    c.egress_overhead_bytes = 0;
    c.ps_port = 0;
    return c;
  }
  // Every packet is accounted for, in every switch a test made.
  void TearDown() override {
    for (const OlafSwitch* s : all_) {
      EXPECT_TRUE(s->counters().Conserved());
      EXPECT_EQ(s->totals().dropped, s->counters().dropped);
      EXPECT_TRUE(s->queue().totals().Conserved());
      EXPECT_LE(s->queue().occupancy(), s->config().depth);
    }
  }
  // An UPDATE of `payload_floats` elements (datagram = 40 + 4n bytes).
  static std::vector<uint8_t> Update(uint16_t cluster = kUnassignedCluster, uint32_t worker = 0,
                                     uint64_t gen = 0, size_t payload_floats = 15,
                                     uint32_t update_id = 1) {
    UpdateHeader h;
    h.cluster_id = cluster;
    h.worker_id = worker;
    h.gen_time_ns = gen;
    h.update_id = update_id;
    std::vector<uint8_t> payload(payload_floats * 4);
    for (size_t i = 0; i < payload_floats; ++i) {
      const float v = static_cast<float>(i + 1);
      std::memcpy(&payload[4 * i], &v, 4);
    }
    return BuildUpdate(h, payload);
  }
  dp::Outcome Send(const std::vector<uint8_t>& d, PortId port, TimeNs now) {
    return sw_->Process(d, port, now, sink_);
  }

  std::unique_ptr<OlafSwitch> sw_;
  std::vector<std::unique_ptr<OlafSwitch>> extra_;
  std::vector<const OlafSwitch*> all_;
  CaptureSink sink_;
};

TEST(WorkerIdTest, IsFnv1aOfTheFiveTuple) {
  // Independently computed (Python) FNV-1a over the 37-byte encoding.
  EXPECT_EQ(WorkerIdOf(FlowKey::V4(0x0A000001, 0x0A000002, 5000, 9500)), 0x72494079u);
  EXPECT_NE(WorkerIdOf(FlowKey::V4(0x0A000001, 0x0A000002, 5001, 9500)),
            WorkerIdOf(FlowKey::V4(0x0A000001, 0x0A000002, 5000, 9500)));
  EXPECT_NE(WorkerIdOf(FlowKey{}), 0u);
}

TEST_F(SwitchTest, ConfigValidationAndNames) {
  OlafSwitchConfig c = Defaults();
  c.ps_port = dp::kMaxPorts;
  EXPECT_FALSE(OlafSwitch::Create(c).ok());
  c = Defaults();
  c.max_workers = 0;
  EXPECT_FALSE(OlafSwitch::Create(c).ok());
  c = Defaults();
  c.depth = 0;
  EXPECT_FALSE(OlafSwitch::Create(c).ok());
  c = Defaults();
  c.cluster_table_capacity = 0;
  EXPECT_FALSE(OlafSwitch::Create(c).ok());
  Make();
  EXPECT_EQ(sw_->name(), "olaf");
  c = Defaults();
  c.policy = QueuePolicy::kFifo;
  Make(c);
  EXPECT_EQ(sw_->name(), "fifo");
  EXPECT_EQ(sw_->BindPort(dp::kMaxPorts, Flow(1, 1)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(sw_->UnbindPort(3).code(), absl::StatusCode::kNotFound);
}

TEST_F(SwitchTest, StampsWorkerAndClusterAndCutsThroughWhenIdle) {
  Make();
  ASSERT_TRUE(sw_->BindPort(1, Flow(1, 5000)).ok());
  ASSERT_TRUE(sw_->cluster_table().Set(5000, 7).ok());
  const auto o = Send(Update(), 1, 100);
  EXPECT_EQ(o.verdict, Verdict::kForwarded);
  const auto out = sink_.Take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].port, 0);
  const OlafPacket p = MustParse(out[0].bytes);
  EXPECT_EQ(p.update.worker_id, WorkerIdOf(Flow(1, 5000)));
  EXPECT_EQ(p.update.cluster_id, 7);
  // Only the stamped fields changed.
  auto want = Update(7, WorkerIdOf(Flow(1, 5000)));
  EXPECT_EQ(out[0].bytes, want);
  EXPECT_EQ(sw_->totals().updates_cut_through, 1u);
  const auto w = sw_->worker(WorkerIdOf(Flow(1, 5000)));
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->port, 1);
  EXPECT_EQ(w->cluster_id, 7);
  const auto cs = sw_->cluster(7, 100);
  ASSERT_TRUE(cs.has_value());
  EXPECT_EQ(cs->queue.enqueued, 1u);
  EXPECT_EQ(cs->queue.dequeued, 1u);
  EXPECT_EQ(cs->workers, 1u);
  ASSERT_TRUE(cs->aom.has_value());
  EXPECT_EQ(cs->aom->current_ns, 100);  // gen 0, dequeued at 100
}

TEST_F(SwitchTest, ClusterResolution) {
  Make();
  ASSERT_TRUE(sw_->BindPort(1, Flow(1, 5000)).ok());
  // No table hit, unassigned header: dropped.
  auto o = Send(Update(), 1, 0);
  EXPECT_EQ(o.verdict, Verdict::kDropped);
  EXPECT_EQ(o.reason, DropReason::kUnknownCluster);
  EXPECT_EQ(sw_->totals().drops_of(dp::DropReason::kUnknownCluster), 1u);
  // No table hit: the header's cluster is kept.
  EXPECT_EQ(Send(Update(3), 1, 0).verdict, Verdict::kForwarded);
  EXPECT_EQ(MustParse(sink_.Take().at(0).bytes).update.cluster_id, 3);
  // A table hit overrides the header; run-time change applies to the next packet.
  ASSERT_TRUE(sw_->cluster_table().Set(5000, 4).ok());
  Send(Update(3), 1, 1000);
  EXPECT_EQ(MustParse(sink_.Take().at(0).bytes).update.cluster_id, 4);
  ASSERT_TRUE(sw_->cluster_table().Erase(5000).ok());
  Send(Update(3), 1, 2000);
  EXPECT_EQ(MustParse(sink_.Take().at(0).bytes).update.cluster_id, 3);
}

TEST_F(SwitchTest, UnboundPortsAndPrestampedWorkers) {
  Make();
  auto o = Send(Update(1), 2, 0);
  EXPECT_EQ(o.verdict, Verdict::kDropped);
  EXPECT_EQ(sw_->totals().drops_of(dp::DropReason::kUnboundPort), 1u);
  // Stamped by an upstream switch: kept as is.
  EXPECT_EQ(Send(Update(1, 0xBEEF), 2, 0).verdict, Verdict::kForwarded);
  EXPECT_EQ(MustParse(sink_.Take().at(0).bytes).update.worker_id, 0xBEEFu);
  EXPECT_EQ(sw_->worker(0xBEEF)->port, 2);
}

TEST_F(SwitchTest, PacingSpendsSizeTimesEightOverRate) {
  Make();  // 1 byte/ns, no overhead; each update is 40 + 60 = 100 bytes -> 100 ns
  for (uint16_t c = 1; c <= 5; ++c) {
    const auto o = Send(Update(c, 100 + c, 0), 1, 0);
    EXPECT_EQ(o.verdict, c == 1 ? Verdict::kForwarded : Verdict::kAggregated) << c;
  }
  EXPECT_EQ(sink_.Take().size(), 1u);
  EXPECT_EQ(sw_->NextWakeNs(), 100);
  sw_->Advance(99, sink_);
  EXPECT_TRUE(sink_.got.empty());
  sw_->Advance(100, sink_);
  EXPECT_EQ(sink_.Take().size(), 1u);
  EXPECT_EQ(sw_->NextWakeNs(), 200);
  sw_->Advance(1000, sink_);  // a late driver: the rest go, timed back to back
  EXPECT_EQ(sink_.Take().size(), 3u);
  EXPECT_EQ(sw_->NextWakeNs(), OlafSwitch::kIdle);
  EXPECT_EQ(sw_->queue_state(1000).link_free_ns, 500);  // N·size·8/R
  // Dequeues were recorded at their start times 0, 100, ..., 400.
  EXPECT_EQ(sw_->cluster(5, 400)->aom->last_delivery_ns, 400);
  // The link is idle at 1000: the next update goes at once.
  EXPECT_EQ(Send(Update(1, 101, 1000), 1, 1000).verdict, Verdict::kForwarded);
  EXPECT_EQ(sw_->queue_state(1000).link_free_ns, 1100);
}

TEST_F(SwitchTest, PacingKeepsSubNanosecondRemainders) {
  OlafSwitchConfig c = Defaults();
  c.egress_rate_bps = 3'000'000'000;  // 100 bytes = 800 bits -> 266.67 ns
  Make(c);
  for (uint16_t k = 1; k <= 4; ++k) Send(Update(k, k, 0), 1, 0);
  for (TimeNs want : {266, 533, 800}) {
    EXPECT_EQ(sw_->NextWakeNs(), want);
    sw_->Advance(sw_->NextWakeNs(), sink_);
  }
  EXPECT_EQ(sink_.Take().size(), 4u);
  EXPECT_EQ(sw_->queue_state(800).link_free_ns, 1066);  // floor(3200 bits / 3 Gbit/s)
}

TEST_F(SwitchTest, OverheadBytesCount) {
  OlafSwitchConfig c = Defaults();
  c.egress_overhead_bytes = 66;
  Make(c);
  Send(Update(1, 1, 0), 1, 0);
  EXPECT_EQ(sw_->queue_state(0).link_free_ns, 166);
}

TEST_F(SwitchTest, UnpacedSendsEverythingAtOnce) {
  OlafSwitchConfig c = Defaults();
  c.egress_rate_bps = 0;
  Make(c);
  for (uint16_t k = 0; k < 20; ++k) {
    EXPECT_EQ(Send(Update(1, 1, 0), 1, 0).verdict, Verdict::kForwarded);
  }
  EXPECT_EQ(sink_.Take().size(), 20u);
  EXPECT_EQ(sw_->NextWakeNs(), OlafSwitch::kIdle);
}

TEST_F(SwitchTest, QueueFullAndMergeVerdicts) {
  OlafSwitchConfig c = Defaults();
  c.depth = 2;
  Make(c);
  EXPECT_EQ(Send(Update(1, 1, 0), 1, 0).verdict, Verdict::kForwarded);  // link idle
  EXPECT_EQ(Send(Update(1, 1, 0), 1, 0).verdict, Verdict::kAggregated);
  EXPECT_EQ(Send(Update(1, 1, 0), 1, 0).verdict, Verdict::kAggregated);
  // Cluster 1 holds the whole queue: the next one merges (same fragment).
  EXPECT_EQ(Send(Update(1, 1, 0), 1, 0).verdict, Verdict::kAggregated);
  EXPECT_EQ(sw_->queue().totals().merged, 1u);
  // Different fragment shape: nothing to merge with.
  UpdateHeader h;
  h.cluster_id = 1;
  h.worker_id = 1;
  h.frag_count = 2;
  const auto o = Send(BuildUpdate(h, F32({1.0f})), 1, 0);
  EXPECT_EQ(o.verdict, Verdict::kDropped);
  EXPECT_EQ(o.reason, DropReason::kQueueFull);
  EXPECT_EQ(sw_->totals().drops_of(dp::DropReason::kQueueFull), 1u);
}

TEST_F(SwitchTest, FifoPolicyTailDrops) {
  OlafSwitchConfig c = Defaults();
  c.policy = QueuePolicy::kFifo;
  c.depth = 2;
  Make(c);
  std::vector<Verdict> v;
  for (int i = 0; i < 5; ++i) v.push_back(Send(Update(1, 1, 0), 1, 0).verdict);
  EXPECT_THAT(v, ElementsAre(Verdict::kForwarded, Verdict::kAggregated, Verdict::kAggregated,
                             Verdict::kDropped, Verdict::kDropped));
  EXPECT_EQ(sw_->totals().drops_of(dp::DropReason::kQueueFull), 2u);
}

TEST_F(SwitchTest, StaleUpdatesDropped) {
  OlafSwitchConfig c = Defaults();
  c.delta_t_ns = 1000;
  Make(c);
  const auto o = Send(Update(1, 1, 0), 1, 1000);
  EXPECT_EQ(o.reason, DropReason::kStaleOnArrival);
  EXPECT_EQ(sw_->totals().drops_of(dp::DropReason::kStaleOnArrival), 1u);
}

TEST_F(SwitchTest, AckStampingMostCongestedSwitchWins) {
  // Chain: workers -> A (port 1) -> A's ps_port 0 == B's port 1 -> B ps_port 0 -> PS.
  OlafSwitchConfig slow = Defaults();
  slow.egress_rate_bps = 8'000'000;  // 1 byte/us: queues build
  Make(slow);
  OlafSwitch& a = *sw_;
  extra_.push_back(MakeSwitch(slow));
  OlafSwitch& b = *extra_.back();
  all_.push_back(&b);
  ASSERT_TRUE(a.BindPort(1, Flow(1, 5000)).ok());
  ASSERT_TRUE(a.cluster_table().Set(5000, 1).ok());
  // Worker 1's first update crosses A (cut-through) and reaches B.
  ASSERT_EQ(a.Process(Update(), 1, 0, sink_).verdict, Verdict::kForwarded);
  auto at_b = sink_.Take();
  ASSERT_EQ(at_b.size(), 1u);
  ASSERT_EQ(b.Process(at_b[0].bytes, 1, 0, sink_).verdict, Verdict::kForwarded);
  sink_.Take();
  const uint32_t w = WorkerIdOf(Flow(1, 5000));
  ASSERT_EQ(b.worker(w)->port, 1);
  // A queues 3 more updates of clusters 2..4 (other workers): util 3/8.
  for (uint16_t c = 2; c <= 4; ++c) {
    ASSERT_EQ(a.Process(Update(c, 50 + c, 1), 2, 1, sink_).verdict, Verdict::kAggregated);
  }
  // PS -> B -> A -> worker.
  ASSERT_EQ(b.Process(Ack(w), 0, 2, sink_).verdict, Verdict::kForwarded);
  auto at_a = sink_.Take();
  ASSERT_EQ(at_a.size(), 1u);
  EXPECT_EQ(at_a[0].port, 1);
  EXPECT_EQ(at_a[0].bytes, Ack(w));  // B's queue is empty: nothing to add
  ASSERT_EQ(a.Process(at_a[0].bytes, 0, 2, sink_).verdict, Verdict::kForwarded);
  auto at_w = sink_.Take();
  ASSERT_EQ(at_w.size(), 1u);
  EXPECT_EQ(at_w[0].port, 1);
  AckHeader got = MustParse(at_w[0].bytes).ack;
  EXPECT_EQ(got.queue_util, 3u * kQueueUtilOne / 8);
  EXPECT_EQ(got.active_clusters, 4);  // A saw clusters 1..4 within ΔT
  EXPECT_EQ(got.aom_us, 3456u);       // PS fields untouched
  EXPECT_EQ(got.model_version, 12u);
  EXPECT_EQ(got.update_id, 77u);

  // Now B is the more congested one: 6 queued (from 6 other workers/clusters).
  for (uint16_t c = 10; c < 16; ++c) b.Process(Update(c, 900 + c, 3), 2, 3, sink_);
  sink_.Take();
  EXPECT_EQ(b.queue().occupancy(), 6u);
  b.Process(Ack(w), 0, 4, sink_);
  at_a = sink_.Take();
  AckHeader via_b = MustParse(at_a.at(0).bytes).ack;
  EXPECT_EQ(via_b.queue_util, 6u * kQueueUtilOne / 8);
  EXPECT_EQ(via_b.active_clusters, 7);  // cluster 1 and 10..15
  a.Process(at_a[0].bytes, 0, 4, sink_);
  got = MustParse(sink_.Take().at(0).bytes).ack;
  EXPECT_EQ(got.queue_util, via_b.queue_util);  // A (3/8) does not override
  EXPECT_EQ(got.active_clusters, 7);
  EXPECT_EQ(a.totals().acks_restamped, 1u);
  EXPECT_EQ(b.totals().acks_restamped, 1u);
}

TEST_F(SwitchTest, AckRoutingErrors) {
  Make();
  auto o = Send(Ack(12345), 0, 0);
  EXPECT_EQ(o.verdict, Verdict::kDropped);
  EXPECT_EQ(sw_->totals().drops_of(dp::DropReason::kUnknownWorker), 1u);
  Send(Update(1, 12345), 3, 0);
  sink_.Take();
  // From a worker port: wrong direction; so is an UPDATE from the PS port.
  EXPECT_EQ(Send(Ack(12345), 3, 0).verdict, Verdict::kDropped);
  EXPECT_EQ(Send(Update(1, 12345), 0, 0).verdict, Verdict::kDropped);
  EXPECT_EQ(sw_->totals().drops_of(dp::DropReason::kWrongDirection), 2u);
  EXPECT_EQ(Send(Ack(12345), 0, 0).verdict, Verdict::kForwarded);
  EXPECT_EQ(sink_.Take().at(0).port, 3);
}

TEST_F(SwitchTest, ModelMulticastToPortsOfTheClustersWorkers) {
  Make();
  Send(Update(1, 11), 1, 0);
  Send(Update(1, 12), 2, 0);
  Send(Update(1, 13), 2, 0);  // a second worker of cluster 1 behind port 2
  Send(Update(2, 21), 3, 0);
  sw_->Advance(1'000'000, sink_);
  sink_.Take();
  EXPECT_EQ(sw_->worker_count(), 4u);
  EXPECT_EQ(sw_->cluster(1, 0)->workers, 3u);
  ModelHeader m;
  m.cluster_id = 1;
  m.model_version = 5;
  const auto model = BuildModel(m, F32({1.0f, 2.0f}));
  EXPECT_EQ(Send(model, 0, 1'000'000).verdict, Verdict::kForwarded);
  auto out = sink_.Take();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].port, 1);
  EXPECT_EQ(out[1].port, 2);
  EXPECT_EQ(out[0].bytes, model);
  EXPECT_EQ(out[1].bytes, model);
  m.cluster_id = kAllClusters;
  Send(BuildModel(m, F32({1.0f})), 0, 1'000'000);
  out = sink_.Take();
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[2].port, 3);
  m.cluster_id = 9;
  EXPECT_EQ(Send(BuildModel(m, F32({1.0f})), 0, 1'000'000).reason, DropReason::kNoRoute);
  EXPECT_EQ(sw_->totals().model_copies_tx, 5u);
  // A worker moving to another port moves its multicast copy.
  Send(Update(2, 21), 4, 2'000'000);
  m.cluster_id = 2;
  Send(BuildModel(m, F32({1.0f})), 0, 2'000'000);
  out = sink_.Take();
  ASSERT_EQ(out.size(), 2u);  // the update to the PS, then the model copy
  EXPECT_EQ(out[1].port, 4);
  sw_->ClearWorkers();
  EXPECT_EQ(Send(BuildModel(m, F32({1.0f})), 0, 2'000'000).verdict, Verdict::kDropped);
}

TEST_F(SwitchTest, UnbindingAPortForgetsItsWorkers) {
  Make();
  ASSERT_TRUE(sw_->BindPort(1, Flow(1, 5000)).ok());
  ASSERT_TRUE(sw_->BindPort(700, Flow(2, 5000)).ok());
  Send(Update(1, 11), 1, 0);
  Send(Update(1, 12), 700, 0);
  sw_->Advance(1'000'000, sink_);
  sink_.Take();
  EXPECT_EQ(sw_->worker_count(), 2u);
  EXPECT_EQ(sw_->cluster(1, 0)->workers, 2u);
  ASSERT_TRUE(sw_->UnbindPort(700).ok());
  EXPECT_EQ(sw_->worker_count(), 1u);
  EXPECT_EQ(sw_->cluster(1, 0)->workers, 1u);
  ModelHeader m;
  m.cluster_id = 1;
  EXPECT_EQ(Send(BuildModel(m, F32({1.0f})), 0, 1'000'000).verdict, Verdict::kForwarded);
  const auto out = sink_.Take();
  ASSERT_EQ(out.size(), 1u);  // port 700's worker gets nothing
  EXPECT_EQ(out[0].port, 1);
  EXPECT_EQ(sw_->UnbindPort(700).code(), absl::StatusCode::kNotFound);
}

TEST_F(SwitchTest, PassthroughIsByteIdentical) {
  Make();
  const std::vector<uint8_t> other = {0x45, 0x00, 0x4F, 0x4C, 0xFF, 0x01, 0x02};
  EXPECT_EQ(Send(other, 5, 0).verdict, Verdict::kForwarded);
  auto out = sink_.Take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].port, 0);
  EXPECT_EQ(out[0].bytes, other);
  // From the PS port there is no default route.
  auto o = Send(other, 0, 0);
  EXPECT_EQ(o.verdict, Verdict::kDropped);
  EXPECT_EQ(sw_->totals().drops_of(dp::DropReason::kNoRoute), 1u);
  ASSERT_TRUE(sw_->SetPassthroughRoute(0, 5).ok());
  ASSERT_TRUE(sw_->SetPassthroughRoute(5, 6).ok());
  EXPECT_EQ(Send(other, 0, 0).verdict, Verdict::kForwarded);
  EXPECT_EQ(Send(std::vector<uint8_t>{}, 5, 0).verdict, Verdict::kForwarded);
  out = sink_.Take();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].port, 5);
  EXPECT_EQ(out[0].bytes, other);
  EXPECT_EQ(out[1].port, 6);
  EXPECT_TRUE(out[1].bytes.empty());
  ASSERT_TRUE(sw_->ClearPassthroughRoute(0).ok());
  EXPECT_EQ(Send(other, 0, 0).verdict, Verdict::kDropped);
  EXPECT_EQ(sw_->SetPassthroughRoute(dp::kMaxPorts, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(sw_->totals().passthrough, 3u);
}

TEST_F(SwitchTest, MalformedOlafDroppedWithParseReason) {
  Make();
  auto d = Update(1, 1);
  d[2] = 9;
  auto o = Send(d, 1, 0);
  EXPECT_EQ(o.verdict, Verdict::kDropped);
  EXPECT_EQ(o.reason, DropReason::kBadVersion);
  EXPECT_EQ(Send({0x4F, 0x4C, 1}, 1, 0).reason, DropReason::kTooShort);
  d = Update(1, 1);
  d.pop_back();
  EXPECT_EQ(Send(d, 1, 0).reason, DropReason::kPayloadLenMismatch);
  EXPECT_EQ(sw_->totals().drops_of(dp::DropReason::kBadVersion), 1u);
  EXPECT_EQ(sw_->totals().drops_of(dp::DropReason::kTooShort), 1u);
  EXPECT_EQ(sw_->totals().drops_of(dp::DropReason::kPayloadLenMismatch), 1u);
  EXPECT_EQ(Send(Update(1, 1), dp::kMaxPorts, 0).reason, DropReason::kBadIngressPort);
  EXPECT_TRUE(sink_.got.empty());
}

TEST_F(SwitchTest, BoundedWorkersAndClusters) {
  OlafSwitchConfig c = Defaults();
  c.max_workers = 2;
  c.max_clusters = 2;
  Make(c);
  EXPECT_EQ(Send(Update(1, 1), 1, 0).verdict, Verdict::kForwarded);
  EXPECT_EQ(Send(Update(2, 2), 1, 1000).verdict, Verdict::kForwarded);
  EXPECT_EQ(Send(Update(2, 3), 1, 2000).verdict, Verdict::kDropped);
  EXPECT_EQ(sw_->totals().drops_of(dp::DropReason::kWorkersExhausted), 1u);
  EXPECT_EQ(Send(Update(3, 1), 1, 3000).verdict, Verdict::kDropped);
  EXPECT_EQ(sw_->totals().drops_of(dp::DropReason::kClustersExhausted), 1u);
  EXPECT_EQ(sw_->worker_count(), 2u);
}

TEST(OlafDropReasonTest, QueueReasonsAreDistinctNamedReasonsOfTheOneEnum) {
  for (size_t i = 0; i < kQueueDropReasonCount; ++i) {
    const dp::DropReason r = kQueueDropReasons[i];
    EXPECT_NE(r, DropReason::kNone);
    EXPECT_EQ(QueueDropIndex(r), i) << dp::ToString(r);
    EXPECT_EQ(dp::DropReasonByName(dp::ToString(r)), r);
  }
  EXPECT_EQ(QueueDropIndex(DropReason::kNoRule), kQueueDropReasonCount);
  // Every parse error the switch can see maps to a parse-stage reason.
  for (OlafParseError e :
       {OlafParseError::kTooShort, OlafParseError::kBadVersion, OlafParseError::kUnknownType,
        OlafParseError::kUnknownFlags, OlafParseError::kPayloadLenMismatch,
        OlafParseError::kPayloadMisaligned, OlafParseError::kEmptyPayload,
        OlafParseError::kFragmentOutOfRange, OlafParseError::kZeroMergedCount}) {
    const DropReason r = FromParseError(e);
    EXPECT_EQ(std::string_view(dp::kDropReasons[static_cast<size_t>(r)].where).substr(0, 5),
              "parse")
        << dp::ToString(r);
  }
}

}  // namespace
}  // namespace inca::olaf
