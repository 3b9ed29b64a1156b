#include "client/op_agreement.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace inca::client {
namespace {

using wire::CaisOp;
using wire::DType;
using wire::ReduceOp;

SwitchOp AllReduce(DType t = DType::kF32, ReduceOp op = ReduceOp::kSum) {
  SwitchOp s;
  s.op = CaisOp::kAllReduce;
  s.type = t;
  s.reduce = op;
  return s;
}

std::string Check(const std::vector<OpDescriptor>& all) {
  absl::Status st = CheckAgreement(3, 7, all);
  return st.ok() ? "ok" : std::string(st.message());
}

TEST(OpAgreementTest, TheSameOperationAgrees) {
  const OpDescriptor d = Describe(AllReduce(), 1000);
  EXPECT_EQ(Check({d, d, d, d}), "ok");
  EXPECT_EQ(Check({}), "ok");
}

TEST(OpAgreementTest, EachFieldThatDiffersIsNamedWithItsRanks) {
  const OpDescriptor f32 = Describe(AllReduce(), 1000);
  EXPECT_EQ(Check({f32, Describe(AllReduce(DType::kI32), 1000), f32}),
            "group 3, operation 7: the ranks disagree on dtype (f32 on ranks 0,2; i32 on rank 1); "
            "no rank ran it");
  EXPECT_EQ(Check({f32, Describe(AllReduce(DType::kF32, ReduceOp::kMax), 1000)}),
            "group 3, operation 7: the ranks disagree on op (sum on rank 0; max on rank 1); no "
            "rank ran it");
  EXPECT_EQ(Check({f32, Describe(AllReduce(), 2000)}),
            "group 3, operation 7: the ranks disagree on count (1000 on rank 0; 2000 on rank 1); "
            "no rank ran it");
  EXPECT_EQ(Check({Describe(AllReduce(), 0), f32}),
            "group 3, operation 7: the ranks disagree on count (0 on rank 0; 1000 on rank 1); no "
            "rank ran it");
  // Two fields at once, in a fixed order.
  EXPECT_EQ(Check({f32, Describe(AllReduce(DType::kBF16), 5)}),
            "group 3, operation 7: the ranks disagree on count (1000 on rank 0; 5 on rank 1), "
            "dtype (f32 on rank 0; bf16 on rank 1); no rank ran it");
}

TEST(OpAgreementTest, CollectiveRootAndLayer) {
  SwitchOp b = AllReduce();
  b.broadcast = true;  // a broadcast rides the switch as an all-reduce
  b.root = 1;
  SwitchOp b2 = b;
  b2.root = 2;
  EXPECT_EQ(Check({Describe(AllReduce(), 8), Describe(b, 8)}),
            "group 3, operation 7: the ranks disagree on collective (all_reduce on rank 0; "
            "broadcast on rank 1), root (0 on rank 0; 1 on rank 1); no rank ran it");
  EXPECT_EQ(Check({Describe(b, 8), Describe(b2, 8)}),
            "group 3, operation 7: the ranks disagree on root (1 on rank 0; 2 on rank 1); no rank "
            "ran it");
  SwitchOp g;
  g.op = CaisOp::kAllGather;
  SwitchOp rs = AllReduce();
  rs.op = CaisOp::kReduceScatter;
  EXPECT_EQ(Check({Describe(g, 8), Describe(rs, 8)}),
            "group 3, operation 7: the ranks disagree on collective (all_gather on rank 0; "
            "reduce_scatter on rank 1); no rank ran it");
  SwitchOp l = AllReduce();
  l.layer_id = 4;
  EXPECT_EQ(Check({Describe(AllReduce(), 8), Describe(l, 8)}),
            "group 3, operation 7: the ranks disagree on layer (0 on rank 0; 4 on rank 1); no "
            "rank ran it");
  // A rank destroying its communicator: only the collective is named.
  EXPECT_EQ(Check({Describe(AllReduce(), 8), Leaving()}),
            "group 3, operation 7: the ranks disagree on collective (all_reduce on rank 0; none "
            "(destroying its communicator) on rank 1); no rank ran it");
}

// What a collective does not use is not compared: a broadcast's or an
// all-gather's reduce op, a non-broadcast's root.
TEST(OpAgreementTest, FieldsACollectiveDoesNotUseAreIgnored) {
  SwitchOp g1;
  g1.op = CaisOp::kAllGather;
  g1.reduce = ReduceOp::kSum;
  SwitchOp g2 = g1;
  g2.reduce = ReduceOp::kMax;
  EXPECT_EQ(Check({Describe(g1, 8), Describe(g2, 8)}), "ok");
  SwitchOp a1 = AllReduce();
  a1.root = 3;
  EXPECT_EQ(Check({Describe(a1, 8), Describe(AllReduce(), 8)}), "ok");
}

// An operation one rank hands to another library (the torch backend's
// Gloo) is compared with what its peers run, by the names of its type and
// reduction.
TEST(OpAgreementTest, DelegatedOperations) {
  DelegatedOp f64;
  f64.count = 1000;
  f64.dtype = "f64";
  f64.reduce = "sum";
  const OpDescriptor inca_f32 = Describe(AllReduce(), 1000);
  EXPECT_EQ(Check({DescribeDelegated(f64), DescribeDelegated(f64)}), "ok");
  EXPECT_EQ(Check({DescribeDelegated(f64), inca_f32, inca_f32}),
            "group 3, operation 7: the ranks disagree on dtype (f64 on rank 0; f32 on ranks 1,2); "
            "no rank ran it");
  DelegatedOp avg = f64;
  avg.reduce = "avg";
  DelegatedOp odd = f64;
  odd.dtype = "quaternion";  // a name inca does not know
  odd.reduce = "xor_shift";
  EXPECT_EQ(Check({DescribeDelegated(avg), DescribeDelegated(odd)}),
            "group 3, operation 7: the ranks disagree on dtype (f64 on rank 0; other on rank 1), "
            "op (avg on rank 0; other on rank 1); no rank ran it");
  // The same operation, delegated on one rank only: the library is named.
  DelegatedOp same;
  same.count = 1000;
  same.dtype = "f32";
  same.reduce = "sum";
  EXPECT_EQ(Check({inca_f32, DescribeDelegated(same)}),
            "group 3, operation 7: the ranks disagree on library (inca on rank 0; delegated on "
            "rank 1); no rank ran it");
  DelegatedOp gather;
  gather.kind = DelegatedOp::Kind::kGather;
  gather.count = 1000;
  gather.dtype = "f32";
  EXPECT_EQ(Check({DescribeDelegated(gather), DescribeDelegated(same)}),
            "group 3, operation 7: the ranks disagree on collective (gather on rank 0; all_reduce "
            "on rank 1); no rank ran it");
}

}  // namespace
}  // namespace inca::client
