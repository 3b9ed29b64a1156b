#include "client/group_roster.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace inca::client {
namespace {

RosterEntry E(int rank, uint32_t group, int world, bool own = false) {
  return RosterEntry{rank, group, world, own};
}

// The verdict as text: "wait", "formed", or the error's message.
std::string Judge(const RosterEntry& me, const std::vector<RosterEntry>& all,
                  bool timed_out = false) {
  const RosterJudgement j = JudgeRoster(me, all, timed_out);
  switch (j.verdict) {
    case RosterVerdict::kWait: return "wait";
    case RosterVerdict::kFormed: return "formed";
    case RosterVerdict::kRefused: return std::string(j.error.message());
  }
  return "?";
}

TEST(GroupRosterTest, EntriesRoundTripAndBadOnesAreRefused) {
  const RosterEntry e = E(2, 7, 4, true);
  const auto back = Decode(Encode(e));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->rank, 2);
  EXPECT_EQ(back->group_id, 7u);
  EXPECT_EQ(back->world_size, 4);
  EXPECT_TRUE(back->own_store);
  for (const char* bad :
       {"", "1 2 3", "4 0 4 0", "-1 0 4 0", "0 0 0 0", "0 0 2 2", "a b c d", "0 0 2 0 9"}) {
    EXPECT_FALSE(Decode(bad).has_value()) << bad;
  }
}

TEST(GroupRosterTest, AGroupFormsWhenEveryRankCameOnce) {
  const std::vector<RosterEntry> two = {E(1, 3, 2), E(0, 3, 2)};
  EXPECT_EQ(Judge(E(0, 3, 2), {E(0, 3, 2)}), "wait");
  EXPECT_EQ(Judge(E(0, 3, 2), two), "formed");
  EXPECT_EQ(Judge(E(1, 3, 2), two), "formed");
  // Other groups sharing the store are neighbours, not disagreements.
  EXPECT_EQ(Judge(E(0, 3, 2), {E(0, 5, 2), E(0, 3, 2), E(1, 5, 2), E(1, 3, 2)}), "formed");
  EXPECT_EQ(Judge(E(0, 3, 2), {E(0, 3, 2), E(0, 1, 4)}, /*timed_out=*/false), "wait");
}

// The same text on every rank, once every rank the entries name has come.
TEST(GroupRosterTest, WorldSizesThatDifferAreOneErrorForAll) {
  const std::vector<RosterEntry> all = {E(0, 3, 4), E(2, 3, 4), E(1, 3, 2), E(3, 3, 4)};
  const std::string want =
      "group creation: the ranks disagree on world size (4 on ranks 0,2,3; 2 on rank 1); no "
      "group was formed";
  for (const RosterEntry& me : all) EXPECT_EQ(Judge(me, all), want);
  // Before rank 3 came, nobody reports (the text would lack it).
  EXPECT_EQ(Judge(E(1, 3, 2), {E(0, 3, 4), E(1, 3, 2), E(2, 3, 4)}), "wait");
}

TEST(GroupRosterTest, GroupIdsThatDifferInAStoreOfTheGroupsOwn) {
  // Rank 0 serves the store: an entry of another group there disagrees.
  const std::vector<RosterEntry> all = {E(0, 1, 2, true), E(1, 2, 2)};
  const std::string want =
      "group creation: the ranks disagree on group id (1 on rank 0; 2 on rank 1); no group was "
      "formed";
  EXPECT_EQ(Judge(E(0, 1, 2, true), all), want);
  EXPECT_EQ(Judge(E(1, 2, 2), all), want);
  EXPECT_EQ(Judge(E(1, 2, 2), {E(1, 2, 2), E(0, 1, 4, true)}), "wait");  // ranks 2, 3 to come
  EXPECT_EQ(Judge(E(1, 2, 2), {E(1, 2, 2), E(0, 1, 4, true), E(3, 1, 4), E(2, 1, 4)}),
            "group creation: the ranks disagree on group id and world size (group 1 of 4 on "
            "ranks 0,2,3; group 2 of 2 on rank 1); no group was formed");
}

// In a store shared by groups, another group id is only suspect once the
// wait ran out: a group that never formed and claims the missing ranks.
TEST(GroupRosterTest, GroupIdsThatDifferInASharedStoreAtTheTimeout) {
  const std::vector<RosterEntry> all = {E(0, 1, 2), E(1, 2, 2)};
  EXPECT_EQ(Judge(E(0, 1, 2), all), "wait");
  const std::string want =
      "group creation: the ranks disagree on group id (1 on rank 0; 2 on rank 1); no group was "
      "formed";
  EXPECT_EQ(Judge(E(0, 1, 2), all, true), want);
  EXPECT_EQ(Judge(E(1, 2, 2), all, true), want);
  // A neighbour that formed is not suspect: this group just lacks rank 1.
  EXPECT_EQ(Judge(E(0, 1, 2), {E(0, 1, 2), E(0, 2, 2), E(1, 2, 2)}, true),
            "group 1 of 2 ranks did not form: rank 1 never came to the rendezvous");
}

TEST(GroupRosterTest, ARankThatCameTwice) {
  EXPECT_EQ(Judge(E(0, 3, 2), {E(0, 3, 2), E(0, 3, 2), E(1, 3, 2)}),
            "group creation: the ranks disagree on rank: rank 0 of group 3 (2 ranks) came more "
            "than once; no group was formed");
  EXPECT_EQ(Judge(E(0, 3, 3), {E(0, 3, 3), E(0, 3, 3)}), "wait");
}

}  // namespace
}  // namespace inca::client
