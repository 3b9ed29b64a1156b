// udp-forwarder's reflector and forwarder over loopback (udp_forwarder.h).
#include "reflect/udp_forwarder.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "switchd/switch_server_test_util.h"  // Host: a UDP peer on loopback

namespace inca::reflect {
namespace {

using switchd::server_test::Clock;
using switchd::server_test::Host;
using switchd::server_test::kDeadline;

TEST(UdpForwarderTest, ReflectsAndForwards) {
  UdpForwarderConfig c;
  c.listen = "127.0.0.1:0";
  auto f = UdpForwarder::Create(c);
  ASSERT_TRUE(f.ok()) << f.status();
  std::thread t([&] { (void)(*f)->Run(); });
  Host a;
  const std::vector<uint8_t> hello = {1, 2, 3};
  a.Send((*f)->local_port(), hello);
  auto back = a.Recv(Clock::now() + kDeadline);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, hello);
  (*f)->Stop();
  t.join();
  EXPECT_EQ((*f)->counters().datagrams_rx, 1u);
  EXPECT_EQ((*f)->counters().datagrams_tx, 1u);

  Host sink1, sink2;
  c.forward = {sink1.endpoint(), sink2.endpoint()};
  auto g = UdpForwarder::Create(c);
  ASSERT_TRUE(g.ok()) << g.status();
  std::thread t2([&] { (void)(*g)->Run(); });
  a.Send((*g)->local_port(), hello);
  EXPECT_EQ(sink1.Recv(Clock::now() + kDeadline), hello);
  EXPECT_EQ(sink2.Recv(Clock::now() + kDeadline), hello);
  (*g)->Stop();
  t2.join();
  EXPECT_EQ((*g)->counters().datagrams_tx, 2u);

  c.forward = {"nowhere"};
  EXPECT_FALSE(UdpForwarder::Create(c).ok());
  c.forward = {};
  c.batch_size = 0;
  EXPECT_FALSE(UdpForwarder::Create(c).ok());
}

}  // namespace
}  // namespace inca::reflect
