// A worker and a PS over loopback UDP, no switch.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <vector>

#include "inca/olaf/olaf_switch.h"
#include "inca/olaf/ps_endpoint.h"
#include "inca/olaf/worker_endpoint.h"
#include "wire/olaf_test_util.h"

namespace inca::olaf {
namespace {

using std::chrono::milliseconds;

// Polls until `done` or 10 s (a bound against hangs, not a timing assertion).
bool PollUntil(const std::function<void()>& poll, const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    poll();
  }
  return true;
}

// Sends raw bytes to 127.0.0.1:port from a fresh socket.
void SendRaw(uint16_t port, const std::vector<uint8_t>& bytes) {
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(
      sendto(fd, bytes.data(), bytes.size(), 0, reinterpret_cast<const sockaddr*>(&to), sizeof(to)),
      static_cast<ssize_t>(bytes.size()));
  close(fd);
}

TEST(OlafUdpEndpointTest, CreateValidatesAddresses) {
  OlafWorkerEndpointOptions w;
  w.peer = "not-an-address";
  EXPECT_FALSE(OlafWorkerEndpoint::Create(w).ok());
  w.peer = "127.0.0.1:0";
  EXPECT_FALSE(OlafWorkerEndpoint::Create(w).ok());
  w.peer = "127.0.0.1:9";
  w.bind = "300.0.0.1:0";
  EXPECT_FALSE(OlafWorkerEndpoint::Create(w).ok());
  OlafPsEndpointOptions p;
  p.bind = "127.0.0.1";
  EXPECT_FALSE(OlafPsEndpoint::Create(p).ok());
  p.bind = "127.0.0.1:0";
  p.ps.model_policy = ModelPolicy::kToUpdatedCluster;  // without model_params
  EXPECT_FALSE(OlafPsEndpoint::Create(p).ok());
}

TEST(OlafUdpEndpointTest, UpdatesAcksAndModelsOverLoopback) {
  constexpr size_t kUpdates = 20;
  constexpr size_t kValues = 5000;  // 3 UPDATE fragments of <= 8932 bytes
  std::vector<AppliedUpdate> applied;
  std::vector<float> params = Ramp(6000, 0.5f);
  OlafPsEndpointOptions po;
  po.ps.apply = [&](const AppliedUpdate& a) { applied.push_back(a); };
  po.ps.model_policy = ModelPolicy::kToUpdatedCluster;
  po.ps.model_params = [&]() { return std::span<const float>(params); };
  po.ps.model_every = 5;
  auto ps_or = OlafPsEndpoint::Create(po);
  ASSERT_TRUE(ps_or.ok()) << ps_or.status();
  OlafPsEndpoint& ps = **ps_or;

  OlafWorkerEndpointOptions wo;
  wo.peer = ps.local_address();
  wo.worker.cluster_id = 3;
  wo.worker.send_control.mode = SendControlMode::kPriority;
  auto w_or = OlafWorkerEndpoint::Create(wo);
  ASSERT_TRUE(w_or.ok()) << w_or.status();
  OlafWorkerEndpoint& w = **w_or;
  EXPECT_NE(w.local_port(), 0);

  for (size_t i = 0; i < kUpdates; ++i) {
    auto s = w.Send(Ramp(kValues, static_cast<float>(i)), static_cast<uint32_t>(i));
    ASSERT_TRUE(s.ok()) << s.status();
    // No switch: ACKs carry util 0, so P stays 1.
    EXPECT_TRUE(s->sent);
    EXPECT_EQ(s->datagrams, 3u);
    EXPECT_EQ(s->send_errors, 0u);
    ASSERT_TRUE(
        PollUntil([&] { ps.Poll(milliseconds(50)); }, [&] { return applied.size() == i + 1; }));
  }
  ASSERT_TRUE(PollUntil([&] { w.Poll(milliseconds(50)); },
                        [&] { return w.stats().acks_rx == 3 * kUpdates; }));
  ASSERT_TRUE(
      PollUntil([&] { w.Poll(milliseconds(50)); }, [&] { return w.latest_model() != nullptr; }));

  // The PS stamped the worker id as a switch would: the flow's 5-tuple hash.
  const uint32_t flow_id =
      WorkerIdOf(FlowKey::V4(0x7F000001, 0x7F000001, w.local_port(), ps.local_port()));
  for (size_t i = 0; i < kUpdates; ++i) {
    EXPECT_EQ(applied[i].values, Ramp(kValues, static_cast<float>(i)));
    EXPECT_EQ(applied[i].update_id, i);
    EXPECT_EQ(applied[i].model_version, i);
    EXPECT_EQ(applied[i].cluster_id, 3);
    EXPECT_EQ(applied[i].worker_id, flow_id);
    EXPECT_EQ(applied[i].merged_count, 1u);
  }
  EXPECT_EQ(ps.stats().updates_applied, kUpdates);
  EXPECT_EQ(ps.stats().acks_sent, 3 * kUpdates);
  EXPECT_EQ(ps.stats().updates_incomplete(), 0u);
  EXPECT_EQ(ps.core().model_version(), kUpdates);
  const AckHeader& last = *w.core().last_ack();
  EXPECT_EQ(last.worker_id, flow_id);
  EXPECT_EQ(last.cluster_id, 3);
  EXPECT_EQ(last.model_version, kUpdates);
  EXPECT_NE(last.aom_us, kAomUnknown);
  EXPECT_EQ(w.core().send_control().Probability(OlafWorkerEndpoint::Now()), 1.0);
  // Models after every 5th applied update; the worker keeps the newest.
  EXPECT_EQ(ps.stats().models_built, kUpdates / 5);
  ASSERT_TRUE(PollUntil([&] { w.Poll(milliseconds(50)); },
                        [&] { return w.latest_model()->model_version == kUpdates; }));
  EXPECT_EQ(w.latest_model()->values, params);
  const auto aom = ps.core().cluster(3, OlafPsEndpoint::Now());
  ASSERT_TRUE(aom.has_value());
  EXPECT_EQ(aom->updates_applied, kUpdates);
  EXPECT_EQ(aom->aom->deliveries, kUpdates);

  // An explicit broadcast of a newer version reaches the worker (the same
  // version again would be stale); a cluster nobody sent is refused.
  ASSERT_TRUE(w.Send(Ramp(kValues, 0), 0).ok());
  ASSERT_TRUE(PollUntil([&] { ps.Poll(milliseconds(50)); },
                        [&] { return applied.size() == kUpdates + 1; }));
  params[0] = -1;
  ASSERT_TRUE(ps.BroadcastModel(params, kAllClusters).ok());
  EXPECT_EQ(ps.BroadcastModel(params, 9).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(PollUntil([&] { w.Poll(milliseconds(50)); },
                        [&] { return w.latest_model()->values[0] == -1.0f; }));
  EXPECT_EQ(w.latest_model()->model_version, kUpdates + 1);
  EXPECT_EQ(w.latest_model()->cluster_id, kAllClusters);
  // Loss as defined in docs/design/olaf-transport.md: none here.
  EXPECT_EQ(ps.stats().worker_updates_applied, w.stats().sent);
}

TEST(OlafUdpEndpointTest, MalformedDatagramsAreCountedAndIgnored) {
  std::vector<AppliedUpdate> applied;
  OlafPsEndpointOptions po;
  po.ps.apply = [&](const AppliedUpdate& a) { applied.push_back(a); };
  auto ps_or = OlafPsEndpoint::Create(po);
  ASSERT_TRUE(ps_or.ok());
  OlafPsEndpoint& ps = **ps_or;
  OlafWorkerEndpointOptions wo;
  wo.peer = ps.local_address();
  wo.worker.cluster_id = 1;
  auto w_or = OlafWorkerEndpoint::Create(wo);
  ASSERT_TRUE(w_or.ok());
  OlafWorkerEndpoint& w = **w_or;

  std::vector<uint8_t> ack(kOlafAckBytes);
  SerializeAck(AckHeader{}, ack);
  UpdateHeader h;
  h.cluster_id = 1;
  std::vector<uint8_t> update = BuildUpdate(h, std::vector<uint8_t>(8, 0));
  std::vector<uint8_t> bad_len = update;
  bad_len.pop_back();
  const std::vector<std::vector<uint8_t>> junk = {
      {0x00},           {'O', 'L'},
      {'O', 'L', 2, 1}, std::vector<uint8_t>(100, 0xFF),
      bad_len,          std::vector<uint8_t>(60000, 'O')};
  for (const auto& j : junk) {
    SendRaw(ps.local_port(), j);
    SendRaw(w.local_port(), j);
  }
  SendRaw(ps.local_port(), ack);    // wrong type at the PS
  SendRaw(w.local_port(), update);  // wrong type at the worker
  const uint64_t total = junk.size() + 1;
  ASSERT_TRUE(PollUntil([&] { ps.Poll(milliseconds(50)); },
                        [&] { return ps.stats().datagrams_rx == total; }));
  ASSERT_TRUE(PollUntil([&] { w.Poll(milliseconds(50)); },
                        [&] { return w.stats().datagrams_rx == total; }));
  EXPECT_EQ(ps.stats().malformed, junk.size());
  EXPECT_EQ(ps.stats().wrong_type, 1u);
  EXPECT_EQ(ps.stats().acks_sent, 0u);
  EXPECT_EQ(ps.io().datagrams_tx, 0u);
  EXPECT_EQ(w.stats().malformed, junk.size());
  EXPECT_EQ(w.stats().wrong_type, 1u);
  EXPECT_EQ(w.stats().acks_rx, 0u);
  EXPECT_TRUE(applied.empty());

  // Both still work afterwards.
  ASSERT_TRUE(w.Send(Ramp(10, 1), 0).ok());
  ASSERT_TRUE(PollUntil([&] { ps.Poll(milliseconds(50)); }, [&] { return applied.size() == 1; }));
  ASSERT_TRUE(PollUntil([&] { w.Poll(milliseconds(50)); }, [&] { return w.stats().acks_rx == 1; }));
}

// The same exchange over IPv6 loopback: the PS stamps the worker id from
// the IPv6 5-tuple, and its ACK finds the worker.
TEST(OlafUdpEndpointTest, AnUpdateAndItsAckOverIpv6) {
  std::vector<AppliedUpdate> applied;
  OlafPsEndpointOptions po;
  po.bind = "[::1]:0";
  po.ps.apply = [&](const AppliedUpdate& a) { applied.push_back(a); };
  auto ps_or = OlafPsEndpoint::Create(po);
  ASSERT_TRUE(ps_or.ok()) << ps_or.status();
  OlafPsEndpoint& ps = **ps_or;
  EXPECT_EQ(ps.local_address().rfind("[::1]:", 0), 0u) << ps.local_address();
  OlafWorkerEndpointOptions wo;
  wo.bind = "[::1]:0";
  wo.peer = ps.local_address();
  wo.worker.cluster_id = 2;
  auto w_or = OlafWorkerEndpoint::Create(wo);
  ASSERT_TRUE(w_or.ok()) << w_or.status();
  OlafWorkerEndpoint& w = **w_or;
  auto s = w.Send(Ramp(5000, 1), 0);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->datagrams, 3u);
  ASSERT_TRUE(PollUntil([&] { ps.Poll(milliseconds(50)); }, [&] { return applied.size() == 1; }));
  ASSERT_TRUE(PollUntil([&] { w.Poll(milliseconds(50)); }, [&] { return w.stats().acks_rx == 3; }));
  FlowKey flow;
  flow.src_ip[15] = 1;  // ::1
  flow.dst_ip[15] = 1;
  flow.src_port = w.local_port();
  flow.dst_port = ps.local_port();
  EXPECT_EQ(applied[0].worker_id, WorkerIdOf(flow));
  EXPECT_EQ(applied[0].values, Ramp(5000, 1));
  EXPECT_EQ(applied[0].cluster_id, 2);
}

}  // namespace
}  // namespace inca::olaf
