#include "membership/port_table.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

#include "absl/container/flat_hash_set.h"
#include "gtest/gtest.h"
#include "net/endpoint.h"

namespace inca::membership {
namespace {

net::Endpoint Ep(const char* s) {
  auto e = net::Endpoint::Parse(s);
  EXPECT_TRUE(e.ok()) << s << ": " << e.status();
  return e.ok() ? *e : net::Endpoint{};
}

TEST(PortTableEndpointTest, ParsesIpv4AndIpv6) {
  net::Endpoint a = Ep("127.0.0.1:9410");
  EXPECT_TRUE(a.valid());
  EXPECT_FALSE(a.is_v6());
  EXPECT_EQ(a.port(), 9410);
  EXPECT_EQ(a.ToString(), "127.0.0.1:9410");
  net::Endpoint b = Ep("[::1]:5");
  EXPECT_TRUE(b.is_v6());
  EXPECT_EQ(b.ToString(), "[::1]:5");
  EXPECT_EQ(Ep("10.0.0.1:0").port(), 0);
}

TEST(PortTableEndpointTest, RejectsMalformed) {
  for (const char* bad :
       {"", "127.0.0.1", "127.0.0.1:", ":9410", "127.0.0.1:65536", "127.0.0.1:-1", "127.0.0.1:+5",
        "::1:9410", "[::1]9410", "[::1", "host.invalid:1", "1.2.3:4", "127.0.0.1:9 "}) {
    EXPECT_FALSE(net::Endpoint::Parse(bad).ok()) << bad;
  }
  EXPECT_FALSE(net::Endpoint{}.valid());
  EXPECT_EQ(net::Endpoint{}.ToString(), "invalid");
}

TEST(PortTableEndpointTest, ResolvesNames) {
  auto e = net::Endpoint::Resolve("localhost:7");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->port(), 7);
  EXPECT_TRUE(net::Endpoint::Resolve("127.0.0.1:8").ok());
}

TEST(PortTableEndpointTest, V4MappedEqualsV4AndRoundTrips) {
  sockaddr_in6 v6{};
  v6.sin6_family = AF_INET6;
  v6.sin6_port = htons(1234);
  ASSERT_EQ(inet_pton(AF_INET6, "::ffff:10.1.2.3", &v6.sin6_addr), 1);
  sockaddr_storage ss{};
  std::memcpy(&ss, &v6, sizeof(v6));
  net::Endpoint mapped = net::Endpoint::FromSockaddr(ss, sizeof(v6));
  EXPECT_EQ(mapped, Ep("10.1.2.3:1234"));
  EXPECT_FALSE(mapped.is_v6());

  sockaddr_storage out;
  ASSERT_EQ(mapped.ToSockaddr(AF_INET, &out), sizeof(sockaddr_in));
  EXPECT_EQ(net::Endpoint::FromSockaddr(out, sizeof(sockaddr_in)), mapped);
  ASSERT_EQ(mapped.ToSockaddr(AF_INET6, &out), sizeof(sockaddr_in6));
  EXPECT_EQ(out.ss_family, AF_INET6);
  EXPECT_EQ(net::Endpoint::FromSockaddr(out, sizeof(sockaddr_in6)), mapped);

  net::Endpoint v6ep = Ep("[2001:db8::1]:9");
  EXPECT_EQ(v6ep.ToSockaddr(AF_INET, &out), 0u);  // not reachable from an IPv4 socket
  ASSERT_EQ(v6ep.ToSockaddr(AF_INET6, &out), sizeof(sockaddr_in6));
  EXPECT_EQ(net::Endpoint::FromSockaddr(out, sizeof(sockaddr_in6)), v6ep);
  EXPECT_EQ(net::Endpoint{}.ToSockaddr(AF_INET6, &out), 0u);
}

TEST(PortTableEndpointTest, ComparesAddressAndPort) {
  EXPECT_EQ(Ep("1.2.3.4:5"), Ep("1.2.3.4:5"));
  EXPECT_NE(Ep("1.2.3.4:5"), Ep("1.2.3.4:6"));
  EXPECT_NE(Ep("1.2.3.4:5"), Ep("1.2.3.5:5"));
  EXPECT_NE(Ep("[::1]:5"), Ep("127.0.0.1:5"));
  absl::flat_hash_set<net::Endpoint> set = {Ep("1.2.3.4:5"), Ep("1.2.3.4:5"), Ep("[::1]:5")};
  EXPECT_EQ(set.size(), 2u);
}

TEST(PortTableEndpointTest, FromSockaddrRejectsShortOrForeign) {
  sockaddr_storage ss{};
  ss.ss_family = AF_INET;
  EXPECT_FALSE(net::Endpoint::FromSockaddr(ss, 4).valid());
  ss.ss_family = AF_UNIX;
  EXPECT_FALSE(net::Endpoint::FromSockaddr(ss, sizeof(ss)).valid());
}

TEST(PortTableTest, StaticEntries) {
  PortTable t;
  ASSERT_TRUE(t.AddStatic(3, Ep("10.0.0.1:1")).ok());
  EXPECT_EQ(t.Lookup(Ep("10.0.0.1:1")), 3);
  ASSERT_NE(t.endpoint(3), nullptr);
  EXPECT_EQ(*t.endpoint(3), Ep("10.0.0.1:1"));
  EXPECT_TRUE(t.is_static(3));
  EXPECT_EQ(t.size(), 1u);
  // Port or endpoint already bound; out of range; invalid endpoint.
  EXPECT_EQ(t.AddStatic(3, Ep("10.0.0.2:1")).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(t.AddStatic(4, Ep("10.0.0.1:1")).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(t.AddStatic(1024, Ep("10.0.0.3:1")).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(t.AddStatic(5, net::Endpoint{}).code(), absl::StatusCode::kInvalidArgument);
  // Static entries are never released, and Bind returns them.
  EXPECT_FALSE(t.Release(3));
  EXPECT_EQ(t.Lookup(Ep("10.0.0.1:1")), 3);
  auto p = t.Bind(Ep("10.0.0.1:1"), 9);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, 3);
}

TEST(PortTableTest, DynamicBindPrefersHeldThenRequestedThenLowest) {
  PortTable t;
  ASSERT_TRUE(t.AddStatic(0, Ep("10.0.0.1:1")).ok());
  EXPECT_EQ(*t.Bind(Ep("10.0.0.2:1")), 1);     // lowest free
  EXPECT_EQ(*t.Bind(Ep("10.0.0.3:1"), 7), 7);  // requested, free
  EXPECT_EQ(*t.Bind(Ep("10.0.0.4:1"), 7), 2);  // requested taken -> lowest free
  EXPECT_EQ(*t.Bind(Ep("10.0.0.3:1"), 9), 7);  // already holds 7
  EXPECT_EQ(*t.Bind(Ep("10.0.0.5:1"), PortTable::kAnyPort), 3);
  EXPECT_FALSE(t.is_static(7));
  EXPECT_EQ(t.Bind(Ep("10.0.0.6:1"), 1024).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(t.Bind(net::Endpoint{}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(t.size(), 5u);
}

TEST(PortTableTest, ReleaseFreesPortAndEndpoint) {
  PortTable t;
  const net::Endpoint a = Ep("10.0.0.2:1");
  ASSERT_EQ(*t.Bind(a, 5), 5);
  EXPECT_TRUE(t.Release(5));
  EXPECT_FALSE(t.Release(5));  // already free
  EXPECT_FALSE(t.Release(200));
  EXPECT_FALSE(t.Lookup(a).has_value());
  EXPECT_EQ(t.endpoint(5), nullptr);
  EXPECT_EQ(t.endpoint(1024), nullptr);
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(*t.Bind(Ep("10.0.0.3:1"), 5), 5);  // reusable
}

TEST(PortTableTest, HoldsOneThousandTwentyFourPeersThenRefuses) {
  PortTable t;
  auto peer = [](int i) {
    return Ep(("10.0." + std::to_string(i / 250) + "." + std::to_string(i % 250) + ":1").c_str());
  };
  for (int i = 0; i < 1024; ++i) {
    auto p = t.Bind(peer(i));
    ASSERT_TRUE(p.ok()) << i;
    EXPECT_EQ(*p, i);
  }
  EXPECT_EQ(t.size(), 1024u);
  EXPECT_EQ(t.Bind(Ep("10.0.9.1:1")).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(*t.Bind(peer(1023)), 1023);  // existing holders still fine
  EXPECT_TRUE(t.Release(17));
  EXPECT_EQ(*t.Bind(Ep("10.0.9.1:1")), 17);
}

}  // namespace
TEST(PortTableTest, ASmallTableRefusesDynamicBindsButNeverStaticOnes) {
  PortTable t(2);
  EXPECT_EQ(*t.Bind(Ep("10.0.0.1:1")), 0);
  EXPECT_EQ(*t.Bind(Ep("10.0.0.2:1"), 900), 900);
  EXPECT_TRUE(t.full());
  EXPECT_EQ(t.Bind(Ep("10.0.0.3:1")).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(t.AddStatic(5, Ep("10.0.0.4:1")).ok());  // the operator's map always fits
  EXPECT_EQ(t.size(), 3u);
  EXPECT_TRUE(t.Release(0));
  EXPECT_EQ(t.Bind(Ep("10.0.0.3:1")).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(t.Release(900));
  EXPECT_EQ(*t.Bind(Ep("10.0.0.3:1")), 0);
}

}  // namespace inca::membership
