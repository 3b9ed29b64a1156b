// PsCore and WorkerCore in memory, alone and with the real OLAF switch core
// in between (virtual time, no sockets).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <vector>

#include "inca/olaf/olaf_switch.h"
#include "inca/olaf/ps.h"
#include "inca/olaf/worker.h"
#include "wire/olaf_test_util.h"

namespace inca::olaf {
namespace {

constexpr dp::TimeNs kMs = dp::kNsPerMs;
constexpr dp::TimeNs kUs = 1000;

std::vector<std::vector<uint8_t>> UpdateFrags(uint16_t cluster, uint32_t worker, uint32_t id,
                                              uint64_t gen, size_t n, uint32_t version = 0) {
  UpdateHeader h;
  h.cluster_id = cluster;
  h.worker_id = worker;
  h.update_id = id;
  h.gen_time_ns = gen;
  h.model_version = version;
  auto f = Fragmenter::Create();
  auto d = f->Update(h, Ramp(n, static_cast<float>(id)));
  EXPECT_TRUE(d.ok());
  return *d;
}

struct Applied {
  std::vector<AppliedUpdate> got;
  std::function<void(const AppliedUpdate&)> Fn() {
    return [this](const AppliedUpdate& a) { got.push_back(a); };
  }
};

std::unique_ptr<PsCore> MakePs(PsOptions o) {
  auto ps = PsCore::Create(std::move(o));
  EXPECT_TRUE(ps.ok()) << ps.status();
  return ps.ok() ? *std::move(ps) : nullptr;
}

// ---- PsCore ----

TEST(OlafPsCoreTest, AomAtThePsOnAHandComputedTimeline) {
  Applied applied;
  PsOptions o;
  o.apply = applied.Fn();
  auto ps = MakePs(o);
  // Cluster 1: update 1 (gen 0) whole at 10 ms.
  PsResult r = ps->OnDatagram(UpdateFrags(1, 7, 1, 0, 10)[0], 10 * kMs);
  EXPECT_EQ(r.outcome, PsOutcome::kApplied);
  EXPECT_EQ(MustParse(r.ack).ack.aom_us, 10'000u);
  // Update 2 (gen 20 ms), two fragments at 25 and 30 ms.
  auto two = UpdateFrags(1, 7, 2, 20 * kMs, 3000);
  ASSERT_EQ(two.size(), 2u);
  r = ps->OnDatagram(two[0], 25 * kMs);
  EXPECT_EQ(r.outcome, PsOutcome::kBuffered);
  EXPECT_EQ(MustParse(r.ack).ack.aom_us, 25'000u);  // a fragment is no delivery
  r = ps->OnDatagram(two[1], 30 * kMs);
  EXPECT_EQ(r.outcome, PsOutcome::kApplied);
  EXPECT_EQ(MustParse(r.ack).ack.aom_us, 10'000u);
  // An old update (gen 5 ms) applied at 35 ms does not refresh the age.
  r = ps->OnDatagram(UpdateFrags(1, 8, 1, 5 * kMs, 10)[0], 35 * kMs);
  EXPECT_EQ(MustParse(r.ack).ack.aom_us, 15'000u);
  // Cluster 2 never delivered: unknown.
  r = ps->OnDatagram(UpdateFrags(2, 9, 1, 0, 3000)[0], 36 * kMs);
  EXPECT_EQ(r.outcome, PsOutcome::kBuffered);
  EXPECT_EQ(MustParse(r.ack).ack.aom_us, kAomUnknown);

  auto c1 = ps->cluster(1, 40 * kMs);
  ASSERT_TRUE(c1.has_value());
  ASSERT_TRUE(c1->aom.has_value());
  EXPECT_EQ(c1->aom->current_ns, 20 * kMs);
  EXPECT_EQ(c1->aom->peak_max_ns, 30 * kMs);  // at 30 ms, freshest was gen 0
  EXPECT_EQ(c1->aom->peaks, 1u);
  // ∫ over [10, 40]: (10+30)/2·20 + (10+15)/2·5 + (15+20)/2·5 = 400 + 62.5 + 87.5 = 550 ms².
  EXPECT_NEAR(c1->aom->average_ns, 550.0 / 30.0 * kMs, 1.0);
  EXPECT_EQ(c1->updates_applied, 3u);
  EXPECT_EQ(c1->fragments_rx, 4u);
  auto c2 = ps->cluster(2, 40 * kMs);
  ASSERT_TRUE(c2.has_value());
  EXPECT_FALSE(c2->aom.has_value());
  EXPECT_EQ(ps->cluster_ids(), (std::vector<uint16_t>{1, 2}));
  EXPECT_FALSE(ps->cluster(3, 40 * kMs).has_value());
}

TEST(OlafPsCoreTest, AppliesEachWholeUpdateOnceAndAcksEveryFragment) {
  Applied applied;
  PsOptions o;
  o.apply = applied.Fn();
  o.initial_model_version = 5;
  auto ps = MakePs(o);
  auto d = UpdateFrags(3, 0, 42, 1000, 5000, /*version=*/4);  // unstamped worker
  ASSERT_EQ(d.size(), 3u);
  std::vector<AckHeader> acks;
  for (size_t i : {2u, 0u, 1u}) {
    PsResult r = ps->OnDatagram(d[i], 2000, /*worker_id_if_unstamped=*/0xABCD);
    ASSERT_EQ(r.ack.size(), kOlafAckBytes);
    acks.push_back(MustParse(r.ack).ack);
  }
  PsResult dup = ps->OnDatagram(d[1], 2001, 0xABCD);
  EXPECT_EQ(dup.outcome, PsOutcome::kDuplicate);
  ASSERT_EQ(applied.got.size(), 1u);
  const AppliedUpdate& a = applied.got[0];
  EXPECT_EQ(a.values, Ramp(5000, 42.0f));
  EXPECT_EQ(a.cluster_id, 3);
  EXPECT_EQ(a.worker_id, 0xABCDu);
  EXPECT_EQ(a.update_id, 42u);
  EXPECT_EQ(a.model_version, 4u);
  EXPECT_EQ(a.gen_time_ns, 1000u);
  EXPECT_EQ(a.merged_count, 1u);
  EXPECT_EQ(a.applied_ns, 2000);
  EXPECT_EQ(a.new_model_version, 6u);
  EXPECT_EQ(ps->model_version(), 6u);
  for (size_t i = 0; i < acks.size(); ++i) {
    EXPECT_EQ(acks[i].worker_id, 0xABCDu);
    EXPECT_EQ(acks[i].update_id, 42u);
    EXPECT_EQ(acks[i].cluster_id, 3);
    EXPECT_EQ(acks[i].queue_util, 0u);
    EXPECT_EQ(acks[i].active_clusters, 0);
    EXPECT_EQ(acks[i].model_version, i + 1 < acks.size() ? 5u : 6u);
  }
  // model_version counts applied updates.
  ps->OnDatagram(UpdateFrags(3, 1, 1, 3000, 1)[0], 3000);
  ps->OnDatagram(UpdateFrags(4, 2, 1, 3000, 1)[0], 3000);
  EXPECT_EQ(ps->model_version(), 8u);
  const PsCounters& c = ps->counters();
  EXPECT_EQ(c.updates_applied, 3u);
  EXPECT_EQ(c.worker_updates_applied, 3u);
  EXPECT_EQ(c.fragments_rx, 6u);
  EXPECT_EQ(c.acks_sent, 6u);
  EXPECT_EQ(c.reassembly.duplicates, 1u);
}

TEST(OlafPsCoreTest, MalformedAndWrongTypeAreCountedWithoutAck) {
  Applied applied;
  PsOptions o;
  o.apply = applied.Fn();
  auto ps = MakePs(o);
  const std::vector<std::vector<uint8_t>> bad = {{},
                                                 {0x00},
                                                 {'O', 'L'},
                                                 {'O', 'L', 9, 1},
                                                 {'X', 'Y', 1, 1, 0, 0},
                                                 std::vector<uint8_t>(40, 0)};
  for (const auto& b : bad) {
    PsResult r = ps->OnDatagram(b, 0);
    EXPECT_EQ(r.outcome, PsOutcome::kMalformed);
    EXPECT_TRUE(r.ack.empty());
  }
  auto good = UpdateFrags(1, 1, 1, 0, 4);
  std::vector<uint8_t> truncated(good[0].begin(), good[0].end() - 4);
  EXPECT_EQ(ps->OnDatagram(truncated, 0).parse_error, OlafParseError::kPayloadLenMismatch);
  std::vector<uint8_t> ack(kOlafAckBytes);
  SerializeAck(AckHeader{}, ack);
  EXPECT_EQ(ps->OnDatagram(ack, 0).outcome, PsOutcome::kWrongType);
  const PsCounters& c = ps->counters();
  EXPECT_EQ(c.malformed, bad.size() + 1);
  EXPECT_EQ(c.wrong_type, 1u);
  EXPECT_EQ(c.acks_sent, 0u);
  EXPECT_EQ(c.datagrams_rx, bad.size() + 2);
  EXPECT_TRUE(applied.got.empty());
}

TEST(OlafPsCoreTest, IncompleteUpdatesTimeOutAndClustersAreBounded) {
  Applied applied;
  PsOptions o;
  o.apply = applied.Fn();
  o.reassembly.timeout_ns = 100 * kMs;
  o.max_clusters = 1;
  auto ps = MakePs(o);
  auto d = UpdateFrags(1, 1, 1, 0, 3000);
  ps->OnDatagram(d[0], 0);
  ps->Advance(100 * kMs);
  EXPECT_EQ(ps->counters().updates_incomplete(), 1u);
  EXPECT_EQ(ps->OnDatagram(d[1], 101 * kMs).outcome, PsOutcome::kBuffered);
  PsResult r = ps->OnDatagram(UpdateFrags(2, 1, 1, 0, 1)[0], 101 * kMs);
  EXPECT_EQ(r.outcome, PsOutcome::kClustersExhausted);
  EXPECT_EQ(ps->counters().clusters_exhausted, 1u);
  EXPECT_TRUE(applied.got.empty());
  EXPECT_EQ(ps->cluster_ids(), (std::vector<uint16_t>{1}));
}

TEST(OlafPsCoreTest, ModelsAreFragmentedAndReassembledByTheWorker) {
  std::vector<float> params = Ramp(5000, -3.0f);
  PsOptions o;
  o.model_policy = ModelPolicy::kToUpdatedCluster;
  o.model_params = [&params]() { return std::span<const float>(params); };
  o.model_every = 2;
  auto ps = MakePs(o);
  PsResult r1 = ps->OnDatagram(UpdateFrags(4, 1, 1, 0, 1)[0], 1);
  EXPECT_TRUE(r1.models.empty());  // every 2nd applied update
  PsResult r2 = ps->OnDatagram(UpdateFrags(4, 1, 2, 0, 1)[0], 2);
  ASSERT_EQ(r2.models.size(), 3u);  // 5000 / 2236 per MODEL fragment
  for (const auto& m : r2.models) {
    const OlafPacket p = MustParse(m);
    EXPECT_EQ(p.type, OlafType::kModel);
    EXPECT_EQ(p.model.cluster_id, 4);
    EXPECT_EQ(p.model.model_version, 2u);
    EXPECT_EQ(p.model.gen_time_ns, 2u);
    EXPECT_LE(m.size(), 9000u - 28);
  }
  auto worker = WorkerCore::Create({});
  ASSERT_TRUE(worker.ok());
  WorkerCore& w = **worker;
  EXPECT_EQ(w.latest_model(), nullptr);
  EXPECT_EQ(w.OnDatagram(r2.models[2], 10), WorkerInbound::kModelFragment);
  EXPECT_EQ(w.OnDatagram(r2.models[0], 10), WorkerInbound::kModelFragment);
  EXPECT_EQ(w.OnDatagram(r2.models[1], 10), WorkerInbound::kModelComplete);
  ASSERT_NE(w.latest_model(), nullptr);
  EXPECT_EQ(w.latest_model()->values, params);
  EXPECT_EQ(w.latest_model()->model_version, 2u);
  // Same version again, or an older one: stale.
  EXPECT_EQ(w.OnDatagram(r2.models[0], 11), WorkerInbound::kStaleModel);
  // BuildModel for all clusters, newer version.
  ps->OnDatagram(UpdateFrags(4, 1, 3, 0, 1)[0], 3);
  params[0] = 100;
  auto all = ps->BuildModel(params, kAllClusters, 4);
  ASSERT_TRUE(all.ok());
  for (const auto& m : *all) w.OnDatagram(m, 12);
  EXPECT_EQ(w.latest_model()->model_version, 3u);
  EXPECT_EQ(w.latest_model()->cluster_id, kAllClusters);
  EXPECT_EQ(w.latest_model()->values[0], 100.0f);
  EXPECT_EQ(w.counters().models_rx, 2u);
  EXPECT_EQ(w.counters().stale_models, 1u);
  EXPECT_FALSE(ps->BuildModel({}, 1, 5).ok());
  EXPECT_EQ(ps->counters().models_built, 2u);
  // The policy needs the parameters.
  PsOptions bad;
  bad.model_policy = ModelPolicy::kToUpdatedCluster;
  EXPECT_FALSE(PsCore::Create(bad).ok());
}

TEST(OlafPsCoreTest, CountsTheBytesOfUpdatesAcksAndModels) {
  // The OLAF paper's cost of feedback: ACK and MODEL bytes against UPDATE
  // bytes, each counted as the datagrams' UDP payload.
  std::vector<float> params(5000, 1.0f);
  PsOptions o;
  o.model_policy = ModelPolicy::kToUpdatedCluster;
  o.model_params = [&params] { return std::span<const float>(params); };
  auto ps = MakePs(o);
  const auto d = UpdateFrags(1, 1, 1, 0, 3000);  // 3000 floats: 2 fragments
  uint64_t update_bytes = 0, ack_bytes = 0, model_bytes = 0;
  for (const auto& f : d) {
    update_bytes += f.size();
    const PsResult r = ps->OnDatagram(f, 1);
    ack_bytes += r.ack.size();
    for (const auto& m : r.models) model_bytes += m.size();
  }
  ps->OnDatagram({d[0].data(), 3}, 2);  // malformed: neither an update nor an ACK
  const PsCounters& c = ps->counters();
  EXPECT_EQ(c.update_bytes_rx, update_bytes);
  EXPECT_EQ(c.ack_bytes, ack_bytes);
  EXPECT_EQ(c.ack_bytes, 2u * kOlafAckBytes);
  EXPECT_GT(model_bytes, 5000u * 4);  // the whole model went out once
  EXPECT_EQ(c.model_bytes_built, model_bytes);
}

TEST(OlafPsCoreTest, FragmentGranularityAppliesEachFragmentAtItsOffset) {
  Applied applied;
  PsOptions o;
  o.apply = applied.Fn();
  o.granularity = ApplyGranularity::kFragment;
  auto ps = MakePs(o);
  auto d = UpdateFrags(2, 5, 1, 7 * kMs, 5000);  // 2233 + 2233 + 534
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(ps->OnDatagram(d[2], 10 * kMs).outcome, PsOutcome::kFragmentApplied);
  EXPECT_EQ(ps->OnDatagram(d[0], 11 * kMs).outcome, PsOutcome::kFragmentApplied);
  ASSERT_EQ(applied.got.size(), 2u);
  const std::vector<float> all = Ramp(5000, 1.0f);
  EXPECT_EQ(applied.got[0].element_offset, 2u * 2233);
  EXPECT_EQ(applied.got[0].frag_index, 2);
  EXPECT_EQ(applied.got[0].frag_count, 3);
  EXPECT_EQ(applied.got[0].values, std::vector<float>(all.begin() + 2 * 2233, all.end()));
  EXPECT_EQ(applied.got[1].element_offset, 0u);
  EXPECT_EQ(applied.got[1].values, std::vector<float>(all.begin(), all.begin() + 2233));
  EXPECT_EQ(ps->model_version(), 2u);
  // A fragment is a delivery: AoM at 11 ms is 4 ms.
  EXPECT_EQ(*ps->aom().Aom(2, 11 * kMs), 4 * kMs);
  // A middle fragment of a different size cannot be placed: rejected.
  auto small = Fragmenter::Create(400);
  UpdateHeader h;
  h.cluster_id = 2;
  auto s = small->Update(h, Ramp(300, 0));
  PsResult r = ps->OnDatagram((*s)[1], 12 * kMs);
  EXPECT_EQ(r.outcome, PsOutcome::kInconsistent);
  EXPECT_EQ(r.ack.size(), kOlafAckBytes);
  EXPECT_EQ(ps->counters().fragments_inconsistent, 1u);
  EXPECT_EQ(applied.got.size(), 2u);
}

TEST(OlafPsCoreTest, ModelAfterLastFragments) {
  std::vector<float> params = Ramp(100, 0);
  PsOptions o;
  o.granularity = ApplyGranularity::kFragment;
  o.model_policy = ModelPolicy::kToUpdatedClusterOnLastFragment;
  o.model_params = [&params]() { return std::span<const float>(params); };
  auto ps = MakePs(o);
  auto a = UpdateFrags(3, 1, 1, 0, 5000), b = UpdateFrags(6, 2, 1, 0, 5000);
  // Middle and first fragments bring no model; a last one does, to its
  // cluster, whatever order they come in.
  EXPECT_TRUE(ps->OnDatagram(a[1], 1).models.empty());
  PsResult last = ps->OnDatagram(b[2], 2);
  ASSERT_EQ(last.models.size(), 1u);
  EXPECT_EQ(MustParse(last.models[0]).model.cluster_id, 6);
  EXPECT_EQ(MustParse(last.models[0]).model.model_version, 2u);
  EXPECT_TRUE(ps->OnDatagram(a[0], 3).models.empty());
  PsResult a_last = ps->OnDatagram(a[2], 4);
  ASSERT_EQ(a_last.models.size(), 1u);
  EXPECT_EQ(MustParse(a_last.models[0]).model.cluster_id, 3);
  EXPECT_EQ(ps->counters().model_triggers, 2u);
  EXPECT_EQ(ps->counters().updates_applied, 4u);
  // model_every counts last fragments.
  o.model_every = 2;
  auto ps2 = MakePs(o);
  EXPECT_TRUE(ps2->OnDatagram(a[2], 1).models.empty());
  EXPECT_EQ(ps2->OnDatagram(b[2], 2).models.size(), 1u);
  // Needs the parameters.
  PsOptions bad;
  bad.model_policy = ModelPolicy::kToUpdatedClusterOnLastFragment;
  EXPECT_FALSE(PsCore::Create(bad).ok());
}

TEST(OlafPsCoreTest, FragmentsOfAnotherModelSizeOrNonFiniteAreRejected) {
  Applied applied;
  PsOptions o;
  o.apply = applied.Fn();
  o.granularity = ApplyGranularity::kFragment;
  o.expected_elements = 5000;  // 3 fragments: 2233 + 2233 + 534
  auto ps = MakePs(o);
  auto good = UpdateFrags(1, 1, 1, 0, 5000);
  for (const auto& d : good) EXPECT_EQ(ps->OnDatagram(d, 1).outcome, PsOutcome::kFragmentApplied);
  // A smaller model: one last fragment of 917 elements, or 2 fragments.
  PsResult r = ps->OnDatagram(UpdateFrags(1, 2, 1, 0, 917)[0], 2);
  EXPECT_EQ(r.outcome, PsOutcome::kInconsistent);
  EXPECT_EQ(r.ack.size(), kOlafAckBytes);  // still acknowledged
  for (const auto& d : UpdateFrags(1, 2, 2, 0, 4000)) {
    EXPECT_EQ(ps->OnDatagram(d, 3).outcome, PsOutcome::kInconsistent);
  }
  // The right shape with a NaN in it.
  UpdateHeader h;
  h.cluster_id = 1;
  h.worker_id = 3;
  std::vector<float> bad = Ramp(5000, 0);
  bad[4999] = NAN;
  auto f = Fragmenter::Create();
  auto nan = f->Update(h, bad);
  ASSERT_TRUE(nan.ok());
  EXPECT_EQ(ps->OnDatagram((*nan)[0], 4).outcome, PsOutcome::kFragmentApplied);
  EXPECT_EQ(ps->OnDatagram((*nan)[2], 4).outcome, PsOutcome::kInconsistent);
  EXPECT_EQ(applied.got.size(), 4u);
  EXPECT_EQ(ps->counters().fragments_inconsistent, 4u);
  EXPECT_EQ(ps->model_version(), 4u);  // rejected fragments do not count
}

TEST(OlafWorkerCoreTest, ModelsOfAnotherSizeAreRejected) {
  WorkerOptions wo;
  wo.model_elements = 100;
  auto w = WorkerCore::Create(wo);
  ASSERT_TRUE(w.ok());
  std::vector<float> small = Ramp(50, 0), right = Ramp(100, 0);
  PsOptions o;
  auto ps = MakePs(o);
  auto wrong = ps->BuildModel(small, 1, 1);
  ASSERT_TRUE(wrong.ok());
  for (const auto& d : *wrong) (*w)->OnDatagram(d, 1);
  EXPECT_EQ((*w)->latest_model(), nullptr);
  EXPECT_EQ((*w)->counters().models_rejected, 1u);
  PsOptions o2;
  o2.initial_model_version = 1;  // the next version
  auto ok = MakePs(o2)->BuildModel(right, 1, 2);
  for (const auto& d : *ok) (*w)->OnDatagram(d, 2);
  ASSERT_NE((*w)->latest_model(), nullptr);
  EXPECT_EQ((*w)->latest_model()->values, right);
}

// ---- WorkerCore ----

TEST(OlafWorkerCoreTest, SendsFragmentedUpdatesStampedWithNow) {
  WorkerOptions o;
  o.cluster_id = 9;
  o.first_update_id = 100;
  auto w = WorkerCore::Create(o);
  ASSERT_TRUE(w.ok());
  auto s = (*w)->Generate(Ramp(3000), 17, 5 * kMs);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->sent);
  EXPECT_EQ(s->probability, 1.0);
  EXPECT_EQ(s->update_id, 100u);
  ASSERT_EQ(s->datagrams.size(), 2u);
  for (const auto& d : s->datagrams) {
    const OlafPacket p = MustParse(d);
    EXPECT_EQ(p.update.cluster_id, 9);
    EXPECT_EQ(p.update.worker_id, kUnstampedWorker);
    EXPECT_EQ(p.update.model_version, 17u);
    EXPECT_EQ(p.update.gen_time_ns, static_cast<uint64_t>(5 * kMs));
    EXPECT_EQ(p.update.merged_count, 1u);
    EXPECT_EQ(p.update.update_id, 100u);
  }
  EXPECT_EQ((*w)->Generate(Ramp(1), 17, 6 * kMs)->update_id, 101u);
  EXPECT_FALSE((*w)->Generate({}, 17, 6 * kMs).ok());
  EXPECT_EQ((*w)->counters().sent, 2u);
  EXPECT_EQ((*w)->counters().datagrams_sent, 3u);
  // A worker with its own id (the simulator's) writes it into every fragment.
  o.worker_id = 0x01020304;
  auto named = WorkerCore::Create(o);
  ASSERT_TRUE(named.ok());
  auto sent = (*named)->Generate(Ramp(3000), 1, kMs);
  ASSERT_TRUE(sent.ok());
  ASSERT_EQ(sent->datagrams.size(), 2u);
  for (const auto& d : sent->datagrams) EXPECT_EQ(MustParse(d).update.worker_id, 0x01020304u);
}

TEST(OlafWorkerCoreTest, AcksDriveSendControl) {
  WorkerOptions o;
  o.send_control.mode = SendControlMode::kPriority;
  auto w = WorkerCore::Create(o);
  ASSERT_TRUE(w.ok());
  WorkerCore& core = **w;
  AckHeader a;
  a.queue_util = kQueueUtilOne;
  a.active_clusters = 4;
  a.aom_us = 1000;
  std::vector<uint8_t> ack(kOlafAckBytes);
  SerializeAck(a, ack);
  EXPECT_EQ(core.OnDatagram(ack, 0), WorkerInbound::kAck);
  EXPECT_DOUBLE_EQ(core.send_control().Probability(0), 0.25);
  auto s = core.GenerateWithDraw(Ramp(10), 0, 0, 0.3);
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->sent);
  EXPECT_TRUE(s->datagrams.empty());
  EXPECT_TRUE(core.GenerateWithDraw(Ramp(10), 0, 0, 0.2)->sent);
  EXPECT_EQ(core.counters().suppressed, 1u);
  EXPECT_EQ(core.counters().sent, 1u);
  EXPECT_EQ(core.counters().generated, 2u);
  // The seeded generator: over many draws about a quarter are sent.
  int sent = 0;
  for (int i = 0; i < 4000; ++i) sent += core.Generate(Ramp(1), 0, 0)->sent ? 1 : 0;
  EXPECT_NEAR(sent / 4000.0, 0.25, 0.03);
  // Malformed and UPDATE datagrams are counted and ignored.
  EXPECT_EQ(core.OnDatagram(std::vector<uint8_t>{1, 2, 3}, 0), WorkerInbound::kMalformed);
  EXPECT_EQ(core.OnDatagram(UpdateFrags(1, 1, 1, 0, 1)[0], 0), WorkerInbound::kWrongType);
  EXPECT_EQ(core.counters().malformed, 1u);
  EXPECT_EQ(core.counters().wrong_type, 1u);
  EXPECT_EQ(core.counters().acks_rx, 1u);
}

// ---- Worker -> OLAF switch -> PS, virtual time ----

struct Net final : dp::PacketSink {
  struct Pkt {
    dp::PortId port;
    std::vector<uint8_t> bytes;
  };
  std::deque<Pkt> out;
  void Emit(dp::PortId port, std::span<const uint8_t> p) override {
    out.push_back({port, std::vector<uint8_t>(p.begin(), p.end())});
  }
};

struct E2E {
  uint64_t sent = 0, suppressed = 0, applied_worker_updates = 0, applied = 0, acks = 0;
  double min_probability = 1;
  uint32_t max_util_seen = 0;
  uint16_t max_active_seen = 0;
  std::vector<uint64_t> applied_per_cluster = std::vector<uint64_t>(3, 0);
  bool models = true;
  uint64_t fragments_rx = 0;
};

// Two clusters (ports 1, 2 -> clusters 1, 2 via the cluster table; ports 3,
// 4 -> clusters 1, 2 via the header), one PS on port 0 behind a 100 Mbit/s
// link; each worker generates an update of `values` f32 every ms for 200 ms
// (2000 values: one 8 KB datagram, 4 workers ~ 2.6x what the link carries).
E2E RunThroughSwitch(SendControlMode mode, size_t values = 2000,
                     ApplyGranularity granularity = ApplyGranularity::kWholeUpdate) {
  E2E res;
  OlafSwitchConfig sc;
  sc.egress_rate_bps = 100'000'000;
  sc.ps_port = 0;
  auto sw_or = OlafSwitch::Create(sc);
  EXPECT_TRUE(sw_or.ok());
  OlafSwitch& sw = **sw_or;
  EXPECT_TRUE(sw.cluster_table().Set(5001, 1).ok());
  EXPECT_TRUE(sw.cluster_table().Set(5002, 2).ok());
  std::vector<std::unique_ptr<WorkerCore>> workers;
  for (dp::PortId port = 1; port <= 4; ++port) {
    EXPECT_TRUE(sw.BindPort(port, FlowKey::V4(0x0A000000u | port, 0x0A000064u,
                                              static_cast<uint16_t>(5000 + port), 9500))
                    .ok());
    WorkerOptions wo;
    wo.cluster_id = port <= 2 ? kUnassignedCluster : static_cast<uint16_t>(port - 2);
    wo.send_control.mode = mode;
    wo.seed = port;
    auto w = WorkerCore::Create(wo);
    EXPECT_TRUE(w.ok());
    workers.push_back(*std::move(w));
  }
  std::vector<float> params = Ramp(100);
  PsOptions po;
  po.apply = [&](const AppliedUpdate& a) {
    ++res.applied;
    res.applied_worker_updates += a.merged_count;
    if (a.cluster_id < 3) ++res.applied_per_cluster[a.cluster_id];
    EXPECT_EQ(a.values.size() + a.element_offset,
              a.frag_index + 1 == a.frag_count ? values : a.element_offset + 2233);
  };
  po.granularity = granularity;
  po.model_policy = ModelPolicy::kToUpdatedCluster;
  po.model_params = [&]() { return std::span<const float>(params); };
  po.model_every = 5;
  auto ps_or = PsCore::Create(po);
  EXPECT_TRUE(ps_or.ok());
  PsCore& ps = **ps_or;

  Net net;
  // Delivers everything the switch emitted, at `now` (zero-latency links).
  auto drain = [&](dp::TimeNs now) {
    while (!net.out.empty()) {
      Net::Pkt p = std::move(net.out.front());
      net.out.pop_front();
      if (p.port == 0) {
        PsResult r = ps.OnDatagram(p.bytes, now);
        EXPECT_NE(r.outcome, PsOutcome::kMalformed);
        if (!r.ack.empty()) sw.Process(r.ack, 0, now, net);
        for (const auto& m : r.models) sw.Process(m, 0, now, net);
      } else {
        WorkerCore& w = *workers[p.port - 1];
        const WorkerInbound in = w.OnDatagram(p.bytes, now);
        EXPECT_TRUE(in != WorkerInbound::kMalformed && in != WorkerInbound::kWrongType);
        if (in == WorkerInbound::kAck) {
          ++res.acks;
          res.max_util_seen = std::max(res.max_util_seen, w.last_ack()->queue_util);
          res.max_active_seen = std::max(res.max_active_seen, w.last_ack()->active_clusters);
        }
      }
    }
  };
  const std::vector<float> grad = Ramp(values);
  for (dp::TimeNs t = 0; t < 200 * kMs; t += 250 * kUs) {
    sw.Advance(t, net);
    drain(t);
    if (t % kMs != 0) continue;
    for (size_t i = 0; i < workers.size(); ++i) {
      auto s = workers[i]->Generate(grad, ps.model_version(), t);
      EXPECT_TRUE(s.ok());
      res.min_probability = std::min(res.min_probability, s->probability);
      for (const auto& d : s->datagrams) {
        sw.Process(d, static_cast<dp::PortId>(i + 1), t, net);
        drain(t);
      }
    }
  }
  for (const auto& w : workers) {
    res.sent += w->counters().sent;
    res.suppressed += w->counters().suppressed;
    res.models = res.models && w->latest_model() != nullptr;
  }
  EXPECT_TRUE(sw.counters().Conserved());
  EXPECT_TRUE(sw.queue().totals().Conserved());
  EXPECT_EQ(ps.counters().worker_updates_applied, res.applied_worker_updates);
  res.fragments_rx = ps.counters().fragments_rx;
  return res;
}

TEST(OlafEndToEndTest, SendControlReactsToTheSwitchQueueState) {
  const E2E off = RunThroughSwitch(SendControlMode::kOff);
  const E2E on = RunThroughSwitch(SendControlMode::kPriority);
  for (const E2E* r : {&off, &on}) {
    EXPECT_GT(r->applied_per_cluster[1], 10u);
    EXPECT_GT(r->applied_per_cluster[2], 10u);
    EXPECT_GT(r->acks, 100u);
    EXPECT_GT(r->max_util_seen, kQueueUtilOne / 2);  // ACKs stamped by the switch
    EXPECT_EQ(r->max_active_seen, 2);
    EXPECT_TRUE(r->models);  // MODELs multicast back to both clusters
    // Loss: worker updates carried by applied updates <= worker updates sent.
    EXPECT_LE(r->applied_worker_updates, r->sent);
  }
  EXPECT_EQ(off.suppressed, 0u);
  EXPECT_EQ(off.min_probability, 1.0);
  EXPECT_EQ(off.sent, 4u * 200);
  EXPECT_LT(on.min_probability, 0.75);  // base ~ 1/N = 0.5 with a full queue
  EXPECT_GT(on.suppressed, 100u);
  EXPECT_LT(on.sent, off.sent);
  // Less offered load, and the PS-facing link still busy: the PS applies
  // about as many updates (the link is the bottleneck in both runs).
  EXPECT_GT(on.applied * 10, off.applied * 8);
}

}  // namespace
}  // namespace inca::olaf

namespace inca::olaf {
namespace {

// Two-fragment updates through a merging switch: whole-update reassembly
// loses most updates (one fragment of the pair is merged away or dropped),
// per-fragment application uses every fragment that arrives.
TEST(OlafEndToEndTest, MultiFragmentUpdatesThroughAMergingSwitch) {
  const E2E whole = RunThroughSwitch(SendControlMode::kOff, 3000, ApplyGranularity::kWholeUpdate);
  const E2E frag = RunThroughSwitch(SendControlMode::kOff, 3000, ApplyGranularity::kFragment);
  EXPECT_GT(whole.fragments_rx, 100u);
  EXPECT_LT(whole.applied * 2, whole.fragments_rx / 2);  // most pairs never complete
  EXPECT_EQ(frag.applied, frag.fragments_rx);            // every fragment applied
  EXPECT_GT(frag.applied_per_cluster[1], 50u);
  EXPECT_GT(frag.applied_per_cluster[2], 50u);
}

}  // namespace
}  // namespace inca::olaf
