// CommunicatorOptions::Validate: the bounds a user meets before any socket.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "inca/client/communicator.h"

namespace inca {
namespace {

using ::testing::HasSubstr;

std::string Error(const CommunicatorOptions& o) {
  const absl::Status s = o.Validate();
  return s.ok() ? "" : std::string(s.message());
}

TEST(CommunicatorOptionsTest, GroupsOfUpTo64RanksOnAnyOf1024SwitchPorts) {
  CommunicatorOptions o;
  o.world_size = 64;
  o.rank = 63;
  o.switch_port = 1023;
  EXPECT_EQ(Error(o), "");
  o.switch_port = -1;
  EXPECT_EQ(Error(o), "");
  o.switch_port = 1024;
  EXPECT_THAT(Error(o), HasSubstr("switch_port 1024 must be -1 (any) or 0..1023"));
  o.switch_port = -2;
  EXPECT_THAT(Error(o), HasSubstr("switch_port -2"));
  o.switch_port = -1;
  o.world_size = 4097;
  EXPECT_THAT(Error(o), HasSubstr("world_size 4097 must be between 1 and 4096"));
  o.world_size = 65;  // across a tree of switches
  EXPECT_EQ(Error(o), "");
  o.world_size = 4;
  o.rank = 4;
  EXPECT_THAT(Error(o), HasSubstr("rank 4 must be in [0, world_size=4)"));
}

TEST(CommunicatorOptionsTest, ChunksAndTimeouts) {
  CommunicatorOptions o;
  o.chunk_size = 8954;
  EXPECT_THAT(Error(o), HasSubstr("multiple of 4"));
  o.chunk_size = 65476;
  EXPECT_THAT(Error(o), HasSubstr("65472"));
  o.chunk_size = 8952;
  o.host_timeout_ms = o.switch_timeout_ms;
  EXPECT_THAT(Error(o), HasSubstr("host_timeout_ms > switch_timeout_ms"));
}

}  // namespace
}  // namespace inca
