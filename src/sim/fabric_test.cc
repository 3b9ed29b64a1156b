// inca-sim's fabrics (docs/sim.md, "Fabrics"), a leaf-spine and a
// three-tier fat-tree: the ranks JOIN
// their leaves, the aggregation manager builds the tree through each
// simulated switch's control API (switchd::SwitchControl), and the real
// dispatcher, reducer and client cores carry every collective up and down
// it; the ring's packets cross the spine. Both exact, at their closed
// forms, with and without oversubscribed uplinks.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "inca/sim/cais_scenario.h"
#include "sim/fabric.h"

namespace inca::sim {
namespace {

CaisSimScenario Fabric(int racks, int hosts, double uplink_gbps) {
  CaisSimScenario s;
  s.backends = {"inca", "ring"};
  s.hosts = hosts;
  s.racks = racks;
  s.link_gbps = 100;
  s.uplink_gbps = uplink_gbps;
  s.sizes = {uint64_t(hosts) * 256 * 4, uint64_t(hosts) * 65'536 * 4};
  s.ops = 2;
  return s;
}

// A k-ary fat-tree of `hosts` (k/2 on each edge switch).
CaisSimScenario FatTree(int k, int hosts, double uplink_gbps) {
  CaisSimScenario s = Fabric(0, hosts, uplink_gbps);
  s.fat_tree_k = k;
  return s;
}

std::string Shape(const CaisSimScenario& s) {
  return s.fat_tree_k > 0 ? absl::StrCat("k=", s.fat_tree_k, " fat-tree of ", s.hosts)
                          : absl::StrCat(s.racks, " racks of ", s.hosts / s.racks);
}

// Every backend, every collective it runs, on a two-tier and a three-tier
// fabric: exact in byte-exact mode, timing mode within 0.5 % of it, each
// at its closed form.
TEST(FabricTest, EveryCollectiveIsExactThroughTheManagersTreeAtItsClosedForm) {
  for (const CaisSimScenario& base :
       {Fabric(2, 4, 0), Fabric(2, 8, 50), Fabric(4, 8, 0), FatTree(4, 16, 0), FatTree(4, 8, 50)}) {
    for (const char* collective : {"allreduce", "reduce_scatter", "all_gather"}) {
      CaisSimScenario s = base;
      s.collective = collective;
      if (s.collective == "allreduce") s.backends.push_back("tree");  // NCCL's: all-reduce only
      const auto exact = RunCaisSimScenario(s);
      s.mode = "timing";  // the same operations, payloads elided
      const auto timing = RunCaisSimScenario(s);
      ASSERT_TRUE(exact.ok() && timing.ok()) << exact.status() << " " << timing.status();
      ASSERT_EQ(exact->rows.size(), 2 * s.backends.size());
      for (size_t i = 0; i < exact->rows.size(); ++i) {
        const CaisSimRow &x = exact->rows[i], &y = timing->rows[i];
        SCOPED_TRACE(absl::StrCat(Shape(base), ", uplink ", base.uplink_gbps, ": ", collective, " ",
                                  x.backend, " ", x.bytes));
        EXPECT_GT(x.checked, 0u);
        EXPECT_EQ(x.wrong + y.wrong, 0u);
        EXPECT_EQ(x.fallback_chunks + y.fallback_chunks, 0u);  // all of it on the tree
        EXPECT_EQ(x.dropped, 0u);
        EXPECT_NEAR(y.mean_us / x.mean_us, 1.0, 0.005);
        EXPECT_LE(x.of_closed_form, 1.01);
        // The closed form leaves out the two extra hops each way of a
        // leaf-spine, four of a fat-tree (and an oversubscribed link's
        // serialisation of the first chunk): most of a small operation's
        // time.
        EXPECT_GE(x.of_closed_form, x.bytes > 500'000 ? 0.94 : base.fat_tree_k > 0 ? 0.25 : 0.35);
      }
    }
  }
}

// Uplinks at a quarter of the host links' rate: the tree and the ring in
// rack order each cross an uplink with the whole tensor (the ring's share
// of it) once each way, so both take four times as long.
TEST(FabricTest, AnOversubscribedUplinkSetsThePaceOfBoth) {
  CaisSimScenario full = Fabric(2, 8, 0), thin = Fabric(2, 8, 25);
  full.mode = thin.mode = "timing";
  full.sizes = thin.sizes = {uint64_t{16} << 20};
  auto a = RunCaisSimScenario(full), b = RunCaisSimScenario(thin);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  for (size_t i = 0; i < 2; ++i) {
    SCOPED_TRACE(a->rows[i].backend);
    EXPECT_NEAR(b->rows[i].mean_us / a->rows[i].mean_us, 4.0, 0.1);
    EXPECT_NEAR(b->rows[i].of_closed_form, 1.0, 0.01);
  }
  // The tree's ranks formed through the manager, and the tree beats the ring.
  EXPECT_GT(a->rows[0].formation_us, 0);
  EXPECT_LT(a->rows[0].mean_us, a->rows[1].mean_us);
}

// Ranks placed across racks at random, as a scheduler places them: the
// ring's neighbours sit in other racks more often, so it crosses an
// uplink several times each way and slows by that much; the tree sends
// each rack's one partial up whatever the order, and takes the same time.
TEST(FabricTest, RanksPlacedAtRandomSlowTheRingNotTheTree) {
  CaisSimScenario ordered = Fabric(2, 8, 50), shuffled = ordered;
  shuffled.placement = "random";
  ordered.sizes = shuffled.sizes = {uint64_t{8} << 20};
  EXPECT_EQ(ordered.RingCrossings(), 1);
  const int crossings = shuffled.RingCrossings();
  ASSERT_GE(crossings, 2);  // this seed's shuffle
  std::vector<int> host = shuffled.HostOfRank();
  std::sort(host.begin(), host.end());
  for (int h = 0; h < 8; ++h) EXPECT_EQ(host[static_cast<size_t>(h)], h);  // one rank per host
  auto a = RunCaisSimScenario(ordered), b = RunCaisSimScenario(shuffled);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << " " << b.status();
  const CaisSimRow &tree_a = a->rows[0], &tree_b = b->rows[0];
  const CaisSimRow &ring_a = a->rows[1], &ring_b = b->rows[1];
  EXPECT_EQ(tree_b.wrong + ring_b.wrong + tree_b.fallback_chunks, 0u);
  EXPECT_NEAR(tree_b.mean_us / tree_a.mean_us, 1.0, 0.005);
  EXPECT_NEAR(ring_b.mean_us / ring_a.mean_us, crossings, 0.05 * crossings);
  EXPECT_NEAR(ring_b.of_closed_form, 1.0, 0.01);
}

// NCCL's double binary tree on the fabric: with ranks in rack order, four
// of each tree's edges join the two racks, so each uplink carries its half
// of the tensor on eight edges each way, four times what the tree the
// manager builds puts on it. Exact, and at that bound; every backend's
// closed form stays a lower bound, small operations included.
TEST(FabricTest, NcclsTreeCrossesTheUplinksOnManyEdges) {
  CaisSimScenario s = Fabric(2, 8, 0);
  s.backends = {"inca", "ring", "tree"};
  s.sizes = {64 << 10, 16 << 20};
  s.mode = "timing";
  for (const char* placement : {"rack", "random"}) {
    s.placement = placement;
    auto r = RunCaisSimScenario(s);
    ASSERT_TRUE(r.ok()) << r.status();
    for (const CaisSimRow& x : r->rows) {
      SCOPED_TRACE(absl::StrCat(placement, " ", x.backend, " ", x.bytes));
      EXPECT_EQ(x.wrong, 0u);
      EXPECT_LE(x.of_closed_form, 1.001);
      if (x.bytes > 1'000'000) {
        EXPECT_GE(x.of_closed_form, 0.99);
      }
    }
  }
  s.placement = "rack";
  s.sizes = {16 << 20};
  auto r = RunCaisSimScenario(s);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->rows[2].mean_us / r->rows[0].mean_us, 4.0, 0.1);  // tree / inca
}

// Several spines: the host baselines' flows between racks spread over
// them by ECMP (a hash of ingress port and destination), so each uplink
// carries the flows hashed onto it, and each backend's closed form, which
// walks the same flows with the same hash, still meets its time. inca's
// group goes up one tree, through spine 0, as the manager builds it: the
// other spines carry none of it, so with four spines of a quarter of the
// rate its uplink is the quarter.
TEST(FabricTest, SpinesShareTheBaselinesFlowsByEcmpAndTheTreeTakesOne) {
  CaisSimScenario one = Fabric(2, 16, 200), four = one;
  one.backends = four.backends = {"inca", "ring", "tree"};
  one.placement = four.placement = "random";
  one.mode = four.mode = "timing";
  one.sizes = four.sizes = {uint64_t{16} << 20};
  four.spines = 4;
  four.uplink_gbps = 50;
  auto a = RunCaisSimScenario(one), b = RunCaisSimScenario(four);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << " " << b.status();
  for (const auto* r : {&*a, &*b}) {
    for (const CaisSimRow& x : r->rows) {
      SCOPED_TRACE(absl::StrCat(x.backend, " over ", r == &*a ? 1 : 4, " spines"));
      EXPECT_EQ(x.wrong + x.fallback_chunks + x.dropped, 0u);
      EXPECT_LE(x.of_closed_form, 1.001);
      // Where an uplink and a host link nearly tie (one spine), the time is
      // a few per cent above the larger of the two bounds.
      EXPECT_GE(x.of_closed_form, 0.95);
    }
  }
  EXPECT_NEAR(b->rows[0].mean_us / a->rows[0].mean_us, 2.0, 0.05);  // inca: 100 -> 50 Gbit/s
  EXPECT_LT(four.RingCrossings(), one.RingCrossings());             // spread over the spines
}

// The k = 4 fat-tree's graph: 8 edge, 8 aggregation and 4 core switches
// of 4 ports each; inca's tree goes edge -> its pod's aggregation switch 0
// -> core 0; a flow crosses 0, 2 or 4 links between switches (same edge
// switch, same pod, another pod), each hop ECMP-picked among the links
// one hop nearer, and comes down at its destination's port.
TEST(FabricTest, AFatTreesRoutesAreItsShortestPaths) {
  const CaisSimScenario s = FatTree(4, 16, 0);
  ASSERT_TRUE(s.Validate().ok()) << s.Validate();
  const sim::Fabric f(s);
  ASSERT_EQ(f.switches().size(), 20u);
  int edges = 0;
  for (size_t i = 0; i < f.switches().size(); ++i) {
    const auto& w = f.switches()[i];
    SCOPED_TRACE(w.name);
    EXPECT_EQ(f.ports(static_cast<int>(i)).size(), 4u);
    edges += w.edge;
    if (w.edge) {
      // Up to its pod's aggregation switches, each up to its two cores:
      // in tree plane j to aggregation switch j mod 2 and core 3 (j mod 2).
      ASSERT_EQ(w.parents.size(), 2u);
      for (size_t a = 0; a < 2; ++a) {
        const auto& agg = f.switches()[static_cast<size_t>(w.parents[a])];
        EXPECT_EQ(agg.name, absl::StrCat("agg", w.name.substr(4, 1), ".", a));
        ASSERT_EQ(agg.parents.size(), 2u);
        EXPECT_EQ(f.switches()[static_cast<size_t>(agg.parents[a])].name,
                  absl::StrCat("core", 3 * a));
        EXPECT_EQ(agg.depth, 1);
      }
      EXPECT_EQ(w.depth, 2);
    }
  }
  EXPECT_EQ(edges, 8);
  EXPECT_EQ(f.switches()[0].name, "core0");
  std::vector<int> used(f.switches().size());
  for (int src = 0; src < 16; ++src) {
    for (int dst = 0; dst < 16; ++dst) {
      int x = f.edge_of(src), hops = 0;
      dp::PortId in = 0;
      while (f.ports(x)[f.routes(x)->Pick(in, static_cast<uint32_t>(dst))].rank < 0) {
        const auto& p = f.ports(x)[f.routes(x)->Pick(in, static_cast<uint32_t>(dst))];
        in = p.peer_port;
        x = p.peer;
        ++used[static_cast<size_t>(x)];
        ASSERT_LE(++hops, 4);
      }
      EXPECT_EQ(f.ports(x)[f.routes(x)->Pick(in, static_cast<uint32_t>(dst))].rank, dst);
      EXPECT_EQ(hops, src / 2 == dst / 2 ? 0 : src / 4 == dst / 4 ? 2 : 4) << src << " " << dst;
    }
  }
  for (size_t i = 0; i < used.size(); ++i) EXPECT_GT(used[i], 0) << f.switches()[i].name;  // ECMP
}

// Links between switches at a quarter of the host links' rate in a k = 4
// fat-tree: inca's tree carries the tensor once each way over each of its
// links, so it takes four times as long; the ring, its ranks placed at
// random, crosses the busiest link as many times as the closed form's
// walk of its flows over the forwarders' ECMP says.
TEST(FabricTest, AnOversubscribedFatTreeSetsThePaceAtItsClosedForm) {
  CaisSimScenario full = FatTree(4, 16, 0), thin = FatTree(4, 16, 25);
  full.mode = thin.mode = "timing";
  full.sizes = thin.sizes = {uint64_t{16} << 20};
  full.placement = thin.placement = "random";
  full.backends = thin.backends = {"inca", "ring", "tree"};
  auto a = RunCaisSimScenario(full), b = RunCaisSimScenario(thin);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_NEAR(b->rows[0].mean_us / a->rows[0].mean_us, 4.0, 0.1);
  EXPECT_GE(thin.RingCrossings(), 2);
  for (const CaisSimRow& x : b->rows) {
    SCOPED_TRACE(x.backend);
    EXPECT_EQ(x.wrong + x.fallback_chunks + x.dropped, 0u);
    EXPECT_LE(x.of_closed_form, 1.001);
    // NCCL's tree: the flows that share its busiest link are its edges'
    // pipelines up and down, which do not keep that link busy end to end.
    EXPECT_GE(x.of_closed_form, x.backend == "tree" ? 0.97 : 0.99);
  }
  EXPECT_LT(b->rows[0].mean_us * 2, b->rows[1].mean_us);  // the tree beats the ring twice over
}

// Only the pods that hold hosts are built: a k = 8 fat-tree's 24 hosts
// fill pod 0's four edge switches and two of pod 1's.
TEST(FabricTest, APartlyFilledFatTreeRunsExact) {
  CaisSimScenario s = FatTree(8, 24, 0);
  s.backends = {"inca", "ring", "tree"};
  s.sizes = {24 * 256 * 4};
  const sim::Fabric f(s);
  EXPECT_EQ(f.switches().size(), 6u + 8u + 16u);  // edge, aggregation (two pods), core
  auto r = RunCaisSimScenario(s);
  ASSERT_TRUE(r.ok()) << r.status();
  for (const CaisSimRow& x : r->rows) {
    SCOPED_TRACE(absl::StrCat(x.backend, " ", x.bytes));
    EXPECT_GT(x.checked, 0u);
    EXPECT_EQ(x.wrong + x.fallback_chunks, 0u);
  }
}

// Other traffic on a fabric: each edge switch's source sends its hosts'
// share of the load to ranks anywhere, so the uplinks carry what crosses
// racks. inca's switches forward it by the fabric's routes as the
// baselines' forwarders do; every backend stays exact and slows. (At 0.1
// of every host's rate a rack sends 20 Gbit/s across its 100 Gbit/s
// uplink; much more than the uplinks carry starves every backend.)
TEST(FabricTest, BackgroundTrafficCrossesTheFabricAndSlowsEveryBackend) {
  for (CaisSimScenario base : {Fabric(2, 8, 0), FatTree(4, 8, 0)}) {
    base.backends = {"inca", "ring", "tree"};
    base.sizes = {uint64_t{4} << 20};
    base.ops = 3;
    CaisSimScenario loaded = base;
    loaded.background_load = 0.1;
    loaded.background_flow_bytes = 256 << 10;
    const auto quiet = RunCaisSimScenario(base);
    const auto busy = RunCaisSimScenario(loaded);
    ASSERT_TRUE(quiet.ok()) << quiet.status();
    ASSERT_TRUE(busy.ok()) << busy.status();
    ASSERT_EQ(busy->rows.size(), 3u);
    for (size_t i = 0; i < busy->rows.size(); ++i) {
      const CaisSimRow &q = quiet->rows[i], &b = busy->rows[i];
      SCOPED_TRACE(absl::StrCat(Shape(base), ": ", b.backend));
      EXPECT_GT(b.checked, 0u);
      EXPECT_EQ(b.wrong, 0u);
      EXPECT_EQ(q.background_packets, 0u);
      EXPECT_GT(b.background_packets, 0u);
      EXPECT_GT(b.mean_us, 1.05 * q.mean_us);
    }
  }
}

// Several jobs on a fabric of several spines: the manager roots each
// job's tree in the tree plane whose switches carry the fewest groups, so
// two jobs interleaved over two racks go up to a spine each and each
// uplink carries one tree, half the time of one spine for both; on a k = 4
// fat-tree they go up to different aggregation switches and cores.
TEST(FabricTest, JobsOnSeveralSpinesAreEachRootedAtOneOfTheirOwn) {
  CaisSimScenario one = Fabric(2, 8, 25);
  one.jobs = 2;
  one.placement = "random";
  one.backends = {"inca"};
  one.mode = "timing";
  one.sizes = {uint64_t{4} << 20};
  CaisSimScenario two = one;
  two.spines = 2;
  CaisSimScenario fat = FatTree(4, 16, 25);
  fat.jobs = 2;
  fat.placement = "random";
  EXPECT_EQ(one.MostTreesOnALink(), 2);
  EXPECT_EQ(two.MostTreesOnALink(), 1);
  EXPECT_EQ(fat.MostTreesOnALink(), 1);
  auto a = RunCaisSimScenario(one), b = RunCaisSimScenario(two);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  for (const auto* r : {&a->rows[0], &b->rows[0]}) {
    EXPECT_NEAR(r->of_closed_form, 1.0, 0.03);
    EXPECT_EQ(r->wrong + r->fallback_chunks, 0u);
  }
  EXPECT_NEAR(a->rows[0].mean_us / b->rows[0].mean_us, 2.0, 0.1);
}

// Several jobs on one fabric, each its own group (its own JOINs and tree,
// installed by the manager in the same round) or its own ring or NCCL
// tree, every operation at once: with uplinks at a quarter of the host
// links' rate, jobs each in a rack of their own never cross an uplink and
// take a single rack's time; jobs interleaved over the racks each cross
// every uplink, inca's two trees sharing each, so they take eight times as
// long (two tensors at a quarter rate), every backend at its closed form
// and exact, each job's time reported.
TEST(FabricTest, SeveralJobsShareTheFabricEachExactAtItsClosedForm) {
  CaisSimScenario apart = Fabric(2, 8, 25);
  apart.jobs = 2;
  apart.backends = {"inca", "ring", "tree"};
  apart.mode = "timing";
  apart.sizes = {uint64_t{4} << 20};
  CaisSimScenario mixed = apart, alone = apart;
  mixed.placement = "random";
  alone.racks = 0;  // one job of 4 on a star: the time with no uplink
  alone.hosts = 4;
  alone.jobs = 1;
  alone.uplink_gbps = 0;
  EXPECT_EQ(apart.MostTreesOnALink(), 0);
  EXPECT_EQ(mixed.MostTreesOnALink(), 2);
  auto a = RunCaisSimScenario(apart), m = RunCaisSimScenario(mixed),
       one = RunCaisSimScenario(alone);
  ASSERT_TRUE(a.ok() && m.ok() && one.ok()) << a.status() << m.status() << one.status();
  for (size_t i = 0; i < 3; ++i) {
    const CaisSimRow &x = a->rows[i], &y = m->rows[i];
    SCOPED_TRACE(x.backend);
    EXPECT_NEAR(x.mean_us / one->rows[i].mean_us, 1.0, 0.02);
    EXPECT_NEAR(x.of_closed_form, 1.0, 0.01);
    EXPECT_NEAR(y.of_closed_form, 1.0, 0.03);
    EXPECT_EQ(x.wrong + y.wrong + x.fallback_chunks + y.fallback_chunks, 0u);
    ASSERT_EQ(y.job_mean_us.size(), 2u);
    EXPECT_LE(std::max(y.job_mean_us[0], y.job_mean_us[1]), y.mean_us * 1.0001);
    EXPECT_GT(std::min(y.job_mean_us[0], y.job_mean_us[1]), 0.0);
  }
  EXPECT_NEAR(m->rows[0].mean_us / a->rows[0].mean_us, 8.0, 0.3);
  for (uint64_t d : m->rows[0].switch_drops) EXPECT_EQ(d, 0u);
  // Fewer slots than the two jobs' windows (32 for 2 x 64): the switches
  // advise each group's ranks a window of 16, its fair share, and nothing
  // is dropped for want of a slot. Switches that do not advise drop what
  // finds no slot, each counted by its reason, and the ranks resend it.
  CaisSimScenario tight = mixed;
  tight.backends = {"inca"};
  tight.switch_slots = 32;
  CaisSimScenario deaf = tight;
  deaf.switch_advise_window = false;
  auto t = RunCaisSimScenario(tight), d = RunCaisSimScenario(deaf);
  ASSERT_TRUE(t.ok() && d.ok()) << t.status() << d.status();
  const auto slot_drops = [](const CaisSimRow& r) {
    return r.switch_drops[static_cast<size_t>(dp::DropReason::kGroupShare)] +
           r.switch_drops[static_cast<size_t>(dp::DropReason::kSlotsExhausted)];
  };
  EXPECT_EQ(slot_drops(t->rows[0]), 0u);
  EXPECT_EQ(t->rows[0].retransmitted, 0u);
  EXPECT_EQ(t->rows[0].wrong + t->rows[0].fallback_chunks, 0u);
  EXPECT_GT(slot_drops(d->rows[0]), 0u);
  EXPECT_GT(d->rows[0].retransmitted, 0u);
  EXPECT_LT(t->rows[0].mean_us, d->rows[0].mean_us);
  EXPECT_NE(CaisResultJson(deaf, *d).find("\"switch_drops\":{\""), std::string::npos);
  // Byte-exact, interleaved: each job's sums are its own ranks' (a rank in
  // the other job's group would add the wrong inputs).
  mixed.mode = "exact";
  mixed.sizes = {uint64_t{256} << 10};
  auto x = RunCaisSimScenario(mixed);
  ASSERT_TRUE(x.ok()) << x.status();
  for (const CaisSimRow& r : x->rows) {
    SCOPED_TRACE(r.backend);
    EXPECT_GT(r.checked, 0u);
    EXPECT_EQ(r.wrong + r.fallback_chunks, 0u);
  }
  for (const auto& [set, says] :
       {std::pair{"jobs=3", "jobs must divide hosts 8"}, std::pair{"jobs=8", "at least 2 ranks"},
        std::pair{"collective=all_gather", "several jobs run allreduce only"}}) {
    CaisSimScenario s = apart;
    const absl::Status st = ApplyCaisOverride(set, &s);
    EXPECT_NE(st.message().find(says), std::string::npos) << set << ": " << st;
  }
}

TEST(FabricTest, WhatAFabricCannotRunIsRefusedNamingTheKey) {
  const struct {
    const char* set;
    const char* says;
  } cases[] = {
      {"racks=3", "racks must be 0 (a star) or 2..64 dividing hosts 8"},
      {"racks=1", "racks must be 0"},
      {"switches=2", "switches must be 1"},
      {"background_load=1", "background_load must be in [0, 1)"},
      {"form_groups=false", "form_groups"},
      {"uplink_gbps=-1", "uplink_gbps must be in [0, 10000]"},
      {"placement=diagonal", "use rack or random"},
      {"spines=0", "spines must be in [1, 16]"},
      {"spines=17", "spines must be in [1, 16]"},
      {"fat_tree_k=4", "racks and fat_tree_k are two fabrics"},
  };
  for (const auto& c : cases) {
    CaisSimScenario s = Fabric(2, 8, 0);
    absl::Status st = ApplyCaisOverride(c.set, &s);  // checks the whole scenario
    if (st.ok()) st = s.Validate();
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << c.set;
    EXPECT_NE(st.message().find(c.says), std::string::npos) << c.set << ": " << st.message();
  }
  CaisSimScenario star;
  star.uplink_gbps = 10;
  EXPECT_NE(star.Validate().message().find("uplink_gbps needs a fabric"), std::string::npos);
  star.uplink_gbps = 0;
  star.placement = "random";
  EXPECT_NE(star.Validate().message().find("placement needs a fabric"), std::string::npos);
  star.placement = "rack";
  star.spines = 2;
  EXPECT_NE(star.Validate().message().find("spines needs racks"), std::string::npos);
  for (const auto& [k, hosts, says] :
       {std::tuple{5, 8, "fat_tree_k must be even, in [4, 64]"},
        std::tuple{66, 66, "fat_tree_k must be even, in [4, 64]"},
        std::tuple{4, 7,
                   "fat_tree_k 4 holds a multiple of 2 hosts (2 on each edge switch) from 4 "
                   "to 16, not hosts 7"},
        std::tuple{4, 18, "to 16, not hosts 18"}, std::tuple{8, 4, "from 8 to 128"}}) {
    const CaisSimScenario s = FatTree(k, hosts, 0);
    EXPECT_NE(s.Validate().message().find(says), std::string::npos) << s.Validate();
  }
  CaisSimScenario spined = FatTree(4, 16, 0);
  spined.spines = 2;
  EXPECT_NE(spined.Validate().message().find("a fat-tree has (k/2)^2 cores"), std::string::npos);
  CaisSimScenario full = Fabric(2, 126, 0);  // 63 hosts a rack: one port left for one spine
  EXPECT_TRUE(full.Validate().ok()) << full.Validate();
  full.spines = 2;
  EXPECT_NE(
      full.Validate().message().find("racks of at most 62 (a leaf's 64 ports hold 2 uplinks)"),
      std::string::npos)
      << full.Validate();
}

}  // namespace
}  // namespace inca::sim
