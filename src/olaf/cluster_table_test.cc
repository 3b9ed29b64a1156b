#include "inca/olaf/cluster_table.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace inca::olaf {
namespace {

using ::testing::ElementsAre;

TEST(ClusterTableTest, SetLookupEraseClear) {
  ClusterTable t;
  EXPECT_EQ(t.capacity(), 1024u);
  EXPECT_FALSE(t.Lookup(5000).has_value());
  ASSERT_TRUE(t.Set(5000, 3).ok());
  ASSERT_TRUE(t.Set(0, 0).ok());
  ASSERT_TRUE(t.Set(65535, 65534).ok());
  EXPECT_EQ(t.Lookup(5000), 3);
  EXPECT_EQ(t.Lookup(0), 0);
  EXPECT_EQ(t.Lookup(65535), 65534);
  EXPECT_FALSE(t.Lookup(5001).has_value());
  EXPECT_EQ(t.size(), 3u);
  EXPECT_THAT(t.Dump(), ElementsAre(ClusterMapping{0, 0}, ClusterMapping{5000, 3},
                                    ClusterMapping{65535, 65534}));
  ASSERT_TRUE(t.Erase(5000).ok());
  EXPECT_FALSE(t.Lookup(5000).has_value());
  EXPECT_EQ(t.Erase(5000).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(t.size(), 2u);
  t.Clear();
  EXPECT_EQ(t.size(), 0u);
  EXPECT_FALSE(t.Lookup(0).has_value());
  EXPECT_TRUE(t.Dump().empty());
}

TEST(ClusterTableTest, RejectsReservedClusterId) {
  ClusterTable t;
  const absl::Status s = t.Set(1, 0xFFFF);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(t.size(), 0u);
}

TEST(ClusterTableTest, CapacityCountsPortsNotUpdates) {
  ClusterTable t(2);
  ASSERT_TRUE(t.Set(1, 10).ok());
  ASSERT_TRUE(t.Set(2, 20).ok());
  EXPECT_EQ(t.Set(3, 30).code(), absl::StatusCode::kResourceExhausted);
  // Remapping an existing port is not an addition.
  ASSERT_TRUE(t.Set(2, 21).ok());
  EXPECT_EQ(t.Lookup(2), 21);
  ASSERT_TRUE(t.Erase(1).ok());
  ASSERT_TRUE(t.Set(3, 30).ok());
  EXPECT_EQ(t.size(), 2u);
}

TEST(ClusterTableTest, RunTimeReconfigurationTakesEffectImmediately) {
  ClusterTable t;
  ASSERT_TRUE(t.Set(7000, 1).ok());
  EXPECT_EQ(t.Lookup(7000), 1);
  ASSERT_TRUE(t.Set(7000, 2).ok());  // an elastic job moves the worker
  EXPECT_EQ(t.Lookup(7000), 2);
  EXPECT_EQ(t.size(), 1u);
}

TEST(ClusterTableTest, CapacityIsClamped) {
  EXPECT_EQ(ClusterTable(0).capacity(), 1u);
  EXPECT_EQ(ClusterTable(1u << 20).capacity(), ClusterTable::kMaxCapacity);
}

}  // namespace
}  // namespace inca::olaf
