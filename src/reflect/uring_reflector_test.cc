// The io_uring reflector (udp-forwarder --io uring): every datagram comes
// back to its sender unchanged and is counted; a forward target is refused
// with a clear error. Where the kernel refuses io_uring (a seccomp profile
// that blocks it), Create says so in one line instead.
#include "reflect/uring_reflector.h"

#include <poll.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

namespace inca::reflect {
namespace {

TEST(UringReflectorTest, ReflectsEveryDatagramOrSaysWhyNot) {
  UdpForwarderConfig c;
  c.listen = "127.0.0.1:0";
  c.batch_size = 4;
  auto r = UringReflector::Create(c);
  if (!UringAvailable()) {
    ASSERT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
    EXPECT_NE(r.status().message().find("liburing-dev"), std::string::npos);
    return;
  }
  if (!r.ok()) {  // the kernel or a seccomp profile refused the ring
    ASSERT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
    EXPECT_NE(r.status().message().find("io_uring_queue_init"), std::string::npos);
    return;
  }
  std::thread run([&] { EXPECT_TRUE((*r)->Run().ok()); });
  auto client = net::BindUdp(*net::Endpoint::Parse("127.0.0.1:0"), size_t{1} << 20);
  ASSERT_TRUE(client.ok()) << client.status();
  sockaddr_storage to;
  const socklen_t to_len = (*r)->socket().local.ToSockaddr(client->family, &to);
  // More datagrams than slots: each slot turns over several times.
  constexpr int kCount = 10;
  for (int i = 0; i < kCount; ++i) {
    const std::string d =
        "datagram " + std::to_string(i) + std::string(static_cast<size_t>(i), 'x');
    ASSERT_EQ(sendto(client->fd.get(), d.data(), d.size(), 0,
                     reinterpret_cast<const sockaddr*>(&to), to_len),
              static_cast<ssize_t>(d.size()));
  }
  std::vector<std::string> back;
  while (back.size() < kCount) {
    pollfd p{client->fd.get(), POLLIN, 0};
    ASSERT_EQ(poll(&p, 1, 5000), 1) << "only " << back.size() << " came back";
    char buf[256];
    const ssize_t n = recv(client->fd.get(), buf, sizeof(buf), 0);
    ASSERT_GT(n, 0);
    back.emplace_back(buf, static_cast<size_t>(n));
  }
  for (int i = 0; i < kCount; ++i) {
    const std::string d =
        "datagram " + std::to_string(i) + std::string(static_cast<size_t>(i), 'x');
    EXPECT_NE(std::find(back.begin(), back.end(), d), back.end()) << d;
  }
  (*r)->Stop();
  run.join();
  const UdpForwarderCounters k = (*r)->counters();
  EXPECT_EQ(k.datagrams_rx, static_cast<uint64_t>(kCount));
  EXPECT_EQ(k.datagrams_tx, static_cast<uint64_t>(kCount));
  EXPECT_EQ(k.send_errors, 0u);
}

TEST(UringReflectorTest, ForwardTargetsAreRefused) {
  UdpForwarderConfig c;
  c.listen = "127.0.0.1:0";
  c.forward = {"127.0.0.1:9"};
  auto r = UringReflector::Create(c);
  ASSERT_FALSE(r.ok());
  if (UringAvailable()) {
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("reflects only"), std::string::npos);
  }
}

}  // namespace
}  // namespace inca::reflect
