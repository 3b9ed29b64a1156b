// inca-sim's leaf-spine fabric (docs/sim.md, "Fabrics"): the ranks JOIN
// their leaves, the aggregation manager builds the tree through each
// simulated switch's control API (switchd::SwitchControl), and the real
// dispatcher, reducer and client cores carry every collective up and down
// it; the ring's packets cross the spine. Both exact, at their closed
// forms, with and without oversubscribed uplinks.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "inca/sim/cais_scenario.h"

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

TEST(FabricTest, EveryCollectiveIsExactThroughTheManagersTreeAtItsClosedForm) {
  for (const CaisSimScenario& base : {Fabric(2, 4, 0), Fabric(2, 8, 50), Fabric(4, 8, 0)}) {
    for (const char* collective : {"allreduce", "reduce_scatter", "all_gather"}) {
      CaisSimScenario s = base;
      s.collective = collective;
      const auto exact = RunCaisSimScenario(s);
      s.mode = "timing";  // the same operations, payloads elided
      const auto timing = RunCaisSimScenario(s);
      ASSERT_TRUE(exact.ok() && timing.ok()) << exact.status() << " " << timing.status();
      ASSERT_EQ(exact->rows.size(), 4u);
      for (size_t i = 0; i < exact->rows.size(); ++i) {
        const CaisSimRow &x = exact->rows[i], &y = timing->rows[i];
        SCOPED_TRACE(absl::StrCat(base.racks, " racks of ", base.hosts / base.racks, ", uplink ",
                                  base.uplink_gbps, ": ", collective, " ", x.backend, " ",
                                  x.bytes));
        EXPECT_GT(x.checked, 0u);
        EXPECT_EQ(x.wrong + y.wrong, 0u);
        EXPECT_EQ(x.fallback_chunks + y.fallback_chunks, 0u);  // all of it on the tree
        EXPECT_EQ(x.dropped, 0u);
        EXPECT_NEAR(y.mean_us / x.mean_us, 1.0, 0.005);
        EXPECT_LE(x.of_closed_form, 1.01);
        // The closed form leaves out the uplinks' two extra hops each way
        // (and an oversubscribed uplink's serialisation of the first
        // chunk): most of a small operation's time.
        EXPECT_GE(x.of_closed_form, x.bytes > 500'000 ? 0.94 : 0.35);
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

TEST(FabricTest, WhatAFabricCannotRunIsRefusedNamingTheKey) {
  const struct {
    const char* set;
    const char* says;
  } cases[] = {
      {"racks=3", "racks must be 0 (a star) or 2..64 dividing hosts 8"},
      {"racks=1", "racks must be 0"},
      {"switches=2", "switches must be 1"},
      {"background_load=0.1", "no background traffic"},
      {"form_groups=false", "form_groups"},
      {"uplink_gbps=-1", "uplink_gbps must be in [0, 10000]"},
      {"placement=diagonal", "use rack or random"},
      {"spines=0", "spines must be in [1, 16]"},
      {"spines=17", "spines must be in [1, 16]"},
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
  EXPECT_NE(star.Validate().message().find("uplink_gbps needs racks"), std::string::npos);
  star.uplink_gbps = 0;
  star.placement = "random";
  EXPECT_NE(star.Validate().message().find("placement needs racks"), std::string::npos);
  star.placement = "rack";
  star.spines = 2;
  EXPECT_NE(star.Validate().message().find("spines needs racks"), std::string::npos);
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
