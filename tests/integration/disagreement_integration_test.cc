// Ranks that disagree about an operation (issue 46): count, dtype, op,
// collective, root, layer, and no elements on one rank, and about the group
// (its id, its world size), on 2 and 4 ranks,
// through a real inca-switchd and with no switch at all. Every rank must get
// the same one-line error naming what differs, no process may abort, and
// the next correct operation must be exact (docs/design/cais-client.md,
// "Ranks that disagree").
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cluster.h"
#include "inca/client/communicator.h"
#include "launch/process.h"

namespace inca::integration {
namespace {

// One case: what every rank runs, given its rank; `field`: what the error
// must name.
struct Case {
  const char* field;
  std::function<absl::Status(Communicator&, int rank)> run;
};

std::vector<float> Floats(size_t n, float v) {
  return std::vector<float>(n, v);
}

std::vector<Case> Cases() {
  return {
      {"count",
       [](Communicator& c, int rank) {
         auto b = Floats(rank == 0 ? 1000 : 2000, 1);
         return c.AllReduce(b.data(), b.size(), DType::kF32, ReduceOp::kSum);
       }},
      {"dtype",
       [](Communicator& c, int rank) {
         auto b = Floats(1000, 1);
         return c.AllReduce(b.data(), b.size(), rank == 1 ? DType::kI32 : DType::kF32,
                            ReduceOp::kSum);
       }},
      {"op",
       [](Communicator& c, int rank) {
         auto b = Floats(1000, 1);
         return c.AllReduce(b.data(), b.size(), DType::kF32,
                            rank == 1 ? ReduceOp::kMax : ReduceOp::kSum);
       }},
      {"collective",
       [](Communicator& c, int rank) {
         auto b = Floats(1000, 1);
         return rank == 1 ? c.Broadcast(b.data(), b.size(), DType::kF32, 0)
                          : c.AllReduce(b.data(), b.size(), DType::kF32, ReduceOp::kSum);
       }},
      {"collective",
       [](Communicator& c, int rank) {
         const size_t n = static_cast<size_t>(c.world_size());
         auto in = Floats(1000 * n, 1);
         auto out = Floats(1000 * n, 0);
         return rank == 1
                    ? c.AllGather(in.data(), out.data(), 1000, DType::kF32)
                    : c.ReduceScatter(in.data(), out.data(), 1000, DType::kF32, ReduceOp::kSum);
       }},
      {"root",
       [](Communicator& c, int rank) {
         auto b = Floats(1000, static_cast<float>(rank));
         return c.Broadcast(b.data(), b.size(), DType::kF32, rank == 1 ? 1 : 0);
       }},
      {"layer",
       [](Communicator& c, int rank) {
         auto b = Floats(1000, 1);
         OpOptions oo;
         oo.layer_id = rank == 1 ? 7 : 3;
         return c.AllReduce(b.data(), b.size(), DType::kF32, ReduceOp::kSum, oo);
       }},
      {"count",
       [](Communicator& c, int rank) {
         auto b = Floats(1000, 1);
         return c.AllReduce(b.data(), rank == 1 ? 0 : b.size(), DType::kF32, ReduceOp::kSum);
       }},
  };
}

// A rank: every case, each followed by a correct operation checked
// exactly; the errors go to `dir`/rank-R, one per line. An exit code.
int RankMain(CommunicatorOptions o, const std::string& dir) {
  auto c = Communicator::Create(o);
  if (!c.ok()) return Fail("create", c.status());
  std::ofstream errors(absl::StrCat(dir, "/rank-", o.rank));
  int rc = 0;
  for (const Case& k : Cases()) {
    const absl::Status st = k.run(**c, o.rank);
    errors << (st.ok() ? std::string("OK") : absl::StrCat(st.code(), " ", st.message())) << "\n";
    if (st.code() != absl::StatusCode::kInvalidArgument) rc = 20;
    if (CheckAll(**c, DType::kF32, ReduceOp::kSum, 3000, 1) != 0) rc = 21;
  }
  if ((*c)->stats().ops_refused != Cases().size()) rc = 22;
  return rc;
}

// Runs `rank_main` on `ranks` forked ranks with the cluster's options (no
// switch unless `with_switch`), each writing into a fresh directory, which
// it returns.
std::string RunEveryRank(
    const Cluster& cl, int ranks, bool with_switch,
    const std::function<int(CommunicatorOptions, const std::string&)>& rank_main) {
  char tmpl[] = "/tmp/inca-disagree-XXXXXX";
  EXPECT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  ExpectAllZero(launch::RunRanks(
      ranks,
      [&](int rank) {
        auto o = cl.Options(rank, ranks);
        if (!with_switch) o.switch_address.clear();
        o.switch_timeout_ms = 1000;
        return rank_main(o, dir);
      },
      kRankTimeout));
  return dir;
}

std::vector<std::string> LinesOf(const std::string& dir, int rank) {
  std::ifstream in(absl::StrCat(dir, "/rank-", rank));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

void ExpectTheSameErrorOnEveryRank(int ranks, bool with_switch) {
  Cluster cl({"--timeout-ms", "400"}, with_switch);
  const std::string dir = RunEveryRank(cl, ranks, with_switch, RankMain);
  std::vector<std::string> first;
  for (int r = 0; r < ranks; ++r) {
    const std::vector<std::string> lines = LinesOf(dir, r);
    ASSERT_EQ(lines.size(), Cases().size()) << "rank " << r;
    if (r == 0) first = lines;
    EXPECT_EQ(lines, first) << "rank " << r << " got another error than rank 0";
  }
  const std::vector<Case> cases = Cases();
  for (size_t i = 0; i < cases.size(); ++i) {
    std::printf("every rank: %s\n", first[i].c_str());
    EXPECT_NE(first[i].find(absl::StrCat("the ranks disagree on ", cases[i].field)),
              std::string::npos)
        << first[i];
    EXPECT_EQ(first[i].find('\n'), std::string::npos);
  }
  std::system(absl::StrCat("rm -rf ", dir).c_str());
}

TEST(DisagreementTest, TwoRanksThroughTheSwitch) {
  ExpectTheSameErrorOnEveryRank(2, true);
}
TEST(DisagreementTest, FourRanksThroughTheSwitch) {
  ExpectTheSameErrorOnEveryRank(4, true);
}
TEST(DisagreementTest, TwoRanksOnTheHostPathAlone) {
  ExpectTheSameErrorOnEveryRank(2, false);
}
TEST(DisagreementTest, FourRanksOnTheHostPathAlone) {
  ExpectTheSameErrorOnEveryRank(4, false);
}

// Ranks that disagree on the group itself: its id, or its world size. They
// meet in the store's roster whatever their group (client/group_roster.h),
// each gets the same InvalidArgument, and a group created again with
// agreeing options works.
void ExpectOneGroupError(int ranks, bool with_switch, const char* field) {
  Cluster cl({}, with_switch);
  const int retry_port = launch::FreeLoopbackPort(false);
  const bool group_id = std::string(field) == "group id";
  const std::string dir =
      RunEveryRank(cl, ranks, with_switch, [&](CommunicatorOptions o, const std::string& out_dir) {
        const int rank = o.rank;
        o.host_timeout_ms = 3000;
        CommunicatorOptions bad = o;
        if (group_id && rank == 1) bad.group_id = 9;
        // With 2 ranks, a rank 1 that counts 3 waits for a rank 2 that never
        // comes: the error comes at host_timeout_ms, the same on both.
        if (!group_id && rank == 1) bad.world_size = ranks > 2 ? ranks - 1 : ranks + 1;
        auto c = Communicator::Create(bad);
        std::ofstream(absl::StrCat(out_dir, "/rank-", rank))
            << (c.ok() ? std::string("OK")
                       : absl::StrCat(c.status().code(), " ", c.status().message()));
        if (c.ok() || c.status().code() != absl::StatusCode::kInvalidArgument) return 20;
        o.store_address = absl::StrCat("127.0.0.1:", retry_port);
        auto good = Communicator::Create(o);
        if (!good.ok()) return Fail("create again", good.status());
        return CheckAll(**good, DType::kF32, ReduceOp::kSum, 3000, 1) == 0 ? 0 : 21;
      });
  std::string first;
  for (int r = 0; r < ranks; ++r) {
    const std::vector<std::string> lines = LinesOf(dir, r);
    const std::string line = lines.empty() ? std::string() : lines[0];
    if (r == 0) first = line;
    EXPECT_EQ(line, first) << "rank " << r << " got another error than rank 0";
  }
  std::printf("every rank: %s\n", first.c_str());
  EXPECT_NE(first.find(absl::StrCat("the ranks disagree on ", field, " (")), std::string::npos)
      << first;
  std::system(absl::StrCat("rm -rf ", dir).c_str());
}

TEST(GroupDisagreementTest, GroupIdOnTwoAndFourRanks) {
  ExpectOneGroupError(2, true, "group id");
  ExpectOneGroupError(4, false, "group id");
}
TEST(GroupDisagreementTest, WorldSizeOnTwoAndFourRanks) {
  ExpectOneGroupError(2, false, "world size");
  ExpectOneGroupError(4, true, "world size");
}

}  // namespace
}  // namespace inca::integration
