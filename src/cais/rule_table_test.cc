#include "inca/cais/rule_table.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace inca::cais {
namespace {

using ::testing::HasSubstr;
using wire::CaisOp;

Rule MakeRule(uint8_t g, std::optional<uint16_t> l, std::optional<uint16_t> c,
              PortMask in = {1, 2, 3, 4}, PortMask out = {1, 2, 3, 4},
              CaisOp op = CaisOp::kAllReduce) {
  return Rule{RuleKey{g, l, c}, in, out, op};
}

TEST(RuleTableTest, SeedAddRuleExample) {
  // cais-cli add-rule --group-id 0 --layer-id 5 --chunk-id 0
  //   --input-ports 1,2,3,4 --output-ports 1,2,3,4 --op-type allreduce
  RuleTable t;
  ASSERT_TRUE(t.Add(MakeRule(0, 5, 0)).ok());
  const Rule* r = t.Lookup(0, 5, 0);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->input_ports.ToString(), "1,2,3,4");
  EXPECT_EQ(r->op, CaisOp::kAllReduce);
  EXPECT_EQ(t.Lookup(0, 5, 1), nullptr);
  EXPECT_EQ(t.Lookup(1, 5, 0), nullptr);
  EXPECT_EQ(t.Lookup(0, 6, 0), nullptr);
}

// A tree's rank ports name, for each rank, an input port or the uplink.
TEST(RuleTableTest, RankPortsAreInputPortsOrTheUplink) {
  Rule r = MakeRule(0, std::nullopt, std::nullopt, {1, 2}, {1, 2});
  r.uplink = 9;
  r.rank_ports = {9, 1, 2, 9};
  EXPECT_TRUE(RuleTable::Validate(r).ok());
  r.rank_ports = {9, 1, 3, 9};
  EXPECT_THAT(RuleTable::Validate(r).message(),
              HasSubstr("rank 2's port 3 is neither an input port nor the uplink"));
  r.rank_ports.assign(Rule::kMaxRankPorts + 1, 1);
  EXPECT_THAT(RuleTable::Validate(r).message(), HasSubstr("4097 rank ports; at most 4096"));
}

TEST(RuleTableTest, MostSpecificRuleWins) {
  RuleTable t;
  ASSERT_TRUE(t.Add(MakeRule(3, std::nullopt, std::nullopt, {1}, {1})).ok());
  ASSERT_TRUE(t.Add(MakeRule(3, std::nullopt, 7, {2}, {2})).ok());
  ASSERT_TRUE(t.Add(MakeRule(3, 9, std::nullopt, {3}, {3})).ok());
  ASSERT_TRUE(t.Add(MakeRule(3, 9, 7, {4}, {4})).ok());
  EXPECT_EQ(t.Lookup(3, 9, 7)->input_ports, PortMask({4}));
  EXPECT_EQ(t.Lookup(3, 9, 8)->input_ports, PortMask({3}));
  EXPECT_EQ(t.Lookup(3, 1, 7)->input_ports, PortMask({2}));
  EXPECT_EQ(t.Lookup(3, 1, 8)->input_ports, PortMask({1}));
  EXPECT_EQ(t.Lookup(4, 9, 7), nullptr);
  // Removing the exact rule exposes the layer wildcard-chunk rule.
  ASSERT_TRUE(t.Delete(RuleKey{3, 9, 7}).ok());
  EXPECT_EQ(t.Lookup(3, 9, 7)->input_ports, PortMask({3}));
  ASSERT_TRUE(t.Delete(RuleKey{3, 9, std::nullopt}).ok());
  EXPECT_EQ(t.Lookup(3, 9, 7)->input_ports, PortMask({2}));
  ASSERT_TRUE(t.Delete(RuleKey{3, std::nullopt, 7}).ok());
  EXPECT_EQ(t.Lookup(3, 9, 7)->input_ports, PortMask({1}));
}

TEST(RuleTableTest, ExtremeKeyValuesDoNotCollide) {
  RuleTable t;
  ASSERT_TRUE(t.Add(MakeRule(255, 65535, 65535, {63}, {0})).ok());
  ASSERT_TRUE(t.Add(MakeRule(255, 65535, std::nullopt, {62}, {0})).ok());
  ASSERT_TRUE(t.Add(MakeRule(255, std::nullopt, 65535, {61}, {0})).ok());
  ASSERT_TRUE(t.Add(MakeRule(0, 0, 0, {0}, {63})).ok());
  EXPECT_EQ(t.Lookup(255, 65535, 65535)->input_ports, PortMask({63}));
  EXPECT_EQ(t.Lookup(255, 65535, 0)->input_ports, PortMask({62}));
  EXPECT_EQ(t.Lookup(255, 0, 65535)->input_ports, PortMask({61}));
  EXPECT_EQ(t.Lookup(0, 0, 0)->output_ports, PortMask({63}));
  EXPECT_EQ(t.size(), 4u);
}

TEST(RuleTableTest, DuplicateKeyIsRefused) {
  RuleTable t;
  ASSERT_TRUE(t.Add(MakeRule(0, 5, std::nullopt)).ok());
  absl::Status s = t.Add(MakeRule(0, 5, std::nullopt, {1, 2}, {1, 2}));
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(s.message(), HasSubstr("group 0 layer 5 chunk *"));
  // The original rule is untouched.
  EXPECT_EQ(t.Lookup(0, 5, 3)->input_ports, PortMask({1, 2, 3, 4}));
}

TEST(RuleTableTest, InvalidRulesAreRefusedWithReason) {
  RuleTable t;
  absl::Status s = t.Add(MakeRule(0, 1, 1, PortMask(), {1}));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("no input ports"));
  s = t.Add(MakeRule(0, 1, 1, {1}, PortMask()));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("no output ports"));
  s = t.Add(MakeRule(0, 1, 1, {1}, {1}, static_cast<CaisOp>(9)));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("unknown op"));
  EXPECT_EQ(t.size(), 0u);
}

TEST(RuleTableTest, CapacityIsEnforced) {
  RuleTable t(3);
  for (uint16_t l = 0; l < 3; ++l) ASSERT_TRUE(t.Add(MakeRule(0, l, 0)).ok());
  absl::Status s = t.Add(MakeRule(0, 3, 0));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("3 rules"));
  ASSERT_TRUE(t.Delete(RuleKey{0, 1, 0}).ok());
  EXPECT_TRUE(t.Add(MakeRule(0, 3, 0)).ok());
}

TEST(RuleTableTest, DeleteMissingIsNotFound) {
  RuleTable t;
  ASSERT_TRUE(t.Add(MakeRule(0, 5, 0)).ok());
  EXPECT_EQ(t.Delete(RuleKey{0, 5, std::nullopt}).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(t.Delete(RuleKey{0, 5, 1}).code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(t.Delete(RuleKey{0, 5, 0}).ok());
  EXPECT_EQ(t.Lookup(0, 5, 0), nullptr);
}

TEST(RuleTableTest, DumpIsOrderedAndComplete) {
  RuleTable t;
  ASSERT_TRUE(t.Add(MakeRule(1, std::nullopt, std::nullopt)).ok());
  ASSERT_TRUE(t.Add(MakeRule(0, 5, 1)).ok());
  ASSERT_TRUE(t.Add(MakeRule(0, 5, 0)).ok());
  ASSERT_TRUE(t.Add(MakeRule(0, 2, std::nullopt)).ok());
  const auto rules = t.Dump();
  ASSERT_EQ(rules.size(), 4u);
  EXPECT_EQ(rules[0].key.ToString(), "group 0 layer 2 chunk *");
  EXPECT_EQ(rules[1].key.ToString(), "group 0 layer 5 chunk 0");
  EXPECT_EQ(rules[2].key.ToString(), "group 0 layer 5 chunk 1");
  EXPECT_EQ(rules[3].key.ToString(), "group 1 layer * chunk *");
  t.Clear();
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(t.Lookup(1, 0, 0), nullptr);
}

TEST(PortMaskTest, RankAndNth) {
  PortMask m{1, 5, 9, 63};
  EXPECT_EQ(m.count(), 4);
  EXPECT_EQ(m.rank_of(1), 0);
  EXPECT_EQ(m.rank_of(9), 2);
  EXPECT_EQ(m.rank_of(63), 3);
  EXPECT_EQ(m.nth(0), 1);
  EXPECT_EQ(m.nth(3), 63);
  EXPECT_FALSE(m.contains(64));
  EXPECT_EQ(m.ToString(), "1,5,9,63");
}

TEST(PortMaskTest, PortsUpTo1023AcrossWords) {
  PortMask m{1023, 64, 0, 700, 63};
  EXPECT_EQ(m.count(), 5);
  EXPECT_EQ(m.rank_of(64), 2);
  EXPECT_EQ(m.rank_of(700), 3);
  EXPECT_EQ(m.rank_of(1023), 4);
  EXPECT_EQ(m.nth(2), 64);
  EXPECT_EQ(m.nth(4), 1023);
  EXPECT_TRUE(m.contains(700));
  EXPECT_FALSE(m.contains(701));
  EXPECT_FALSE(m.contains(1024));
  m.add(1024);  // ignored
  EXPECT_EQ(m.count(), 5);
  EXPECT_EQ(m.ToVector(), (std::vector<dp::PortId>{0, 63, 64, 700, 1023}));
  std::vector<dp::PortId> seen;
  m.ForEach([&](dp::PortId p) { seen.push_back(p); });
  EXPECT_EQ(seen, m.ToVector());
  EXPECT_NE(m, (PortMask{0, 63, 64, 700}));
  EXPECT_EQ(m, (PortMask{0, 63, 64, 700, 1023}));
  EXPECT_TRUE(PortMask().empty());
}

TEST(RuleTableTest, AGroupHasAtMost64Inputs) {
  PortMask many;
  for (dp::PortId p = 0; p < 65; ++p) many.add(static_cast<dp::PortId>(p * 15));
  Rule r{RuleKey{1, std::nullopt, std::nullopt}, many, PortMask{1}, std::nullopt};
  EXPECT_THAT(std::string(RuleTable::Validate(r).message()), ::testing::HasSubstr("at most 64"));
  many = PortMask();
  for (dp::PortId p = 0; p < 64; ++p) many.add(static_cast<dp::PortId>(p * 15));
  r.input_ports = many;
  EXPECT_TRUE(RuleTable::Validate(r).ok());
}

}  // namespace
}  // namespace inca::cais
