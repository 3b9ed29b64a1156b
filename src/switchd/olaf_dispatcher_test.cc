// OlafDispatcher on a manual clock, no sockets: peers bound on first sight,
// their leases, and the operator-mapped peer that takes the longest-silent
// peer's port when none is free.
#include "switchd/olaf_dispatcher.h"
#include "util/recording_event_log.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace inca::switchd {
namespace {

constexpr dp::TimeNs kMs = dp::kNsPerMs;

class NullSink final : public dp::PacketSink {
 public:
  void Emit(dp::PortId, std::span<const uint8_t>) override { ++packets; }
  uint64_t packets = 0;
};

using RecordingLog = ::inca::testing::RecordingEventLog;

net::Endpoint Ep(const char* s) {
  auto e = net::Endpoint::Parse(s);
  EXPECT_TRUE(e.ok()) << e.status();
  return *e;
}

class OlafDispatcherTest : public ::testing::Test {
 protected:
  // A switch whose port table holds the PS (static, port 0) and at most
  // `max_bound - 1` peers.
  void Make(size_t max_bound = membership::PortTable::kCapacity) {
    olaf::OlafSwitchConfig c;
    c.egress_rate_bps = 0;
    c.max_workers = 64;
    auto p = olaf::OlafSwitch::Create(c);
    ASSERT_TRUE(p.ok()) << p.status();
    program_ = std::move(*p);
    ports_ = std::make_unique<membership::PortTable>(max_bound);
    ASSERT_TRUE(ports_->AddStatic(0, ps_).ok());
    dispatcher_ = std::make_unique<OlafDispatcher>(
        program_.get(), ports_.get(),
        OlafDispatcherOptions{.local = local_, .lease = 100 * kMs, .log = &log_});
  }
  void From(const net::Endpoint& e, dp::TimeNs now) {
    dispatcher_->OnDatagram(datagram_, e, now, sink_);
  }

  const net::Endpoint ps_ = Ep("198.18.0.9:7000");
  const net::Endpoint local_ = Ep("198.18.0.1:9420");
  const std::vector<uint8_t> datagram_ = std::vector<uint8_t>(64, 0);  // not an update: dropped
  std::unique_ptr<olaf::OlafSwitch> program_;
  std::unique_ptr<membership::PortTable> ports_;
  std::unique_ptr<OlafDispatcher> dispatcher_;
  NullSink sink_;
  RecordingLog log_;
};

TEST_F(OlafDispatcherTest, APeerIsBoundOnFirstSightAndTheProgramLearnsItsFlow) {
  Make();
  const net::Endpoint w = Ep("198.18.0.10:5000");
  From(w, 0);
  ASSERT_EQ(ports_->Lookup(w), std::optional<dp::PortId>(1));
  const std::optional<olaf::FlowKey> flow = program_->BoundFlow(1);
  ASSERT_TRUE(flow.has_value());
  EXPECT_EQ(flow->src_port, 5000);
  EXPECT_EQ(flow->dst_port, 9420);
  EXPECT_EQ(flow->src_ip, w.V6MappedAddress());
  EXPECT_EQ(flow->dst_ip, local_.V6MappedAddress());
  From(w, kMs);    // the same port again
  From(ps_, kMs);  // the PS keeps its static port 0
  EXPECT_EQ(ports_->size(), 2u);
  EXPECT_EQ(program_->counters().rx_packets, 3u);  // every datagram reached the program
  ASSERT_FALSE(log_.lines.empty());
  EXPECT_EQ(log_.lines[0], "event=peer_bound endpoint=198.18.0.10:5000 port=1");
}

TEST_F(OlafDispatcherTest, APeerSilentForALeaseLosesItsPortAndItsNextDatagramBindsItAgain) {
  Make();
  const net::Endpoint w = Ep("198.18.0.10:5000");
  From(ps_, 0);
  From(w, 0);
  From(w, 60 * kMs);  // renews the lease: now 60 + 100 ms
  dispatcher_->Expire(130 * kMs);
  EXPECT_TRUE(ports_->Lookup(w).has_value());
  EXPECT_EQ(dispatcher_->counters().peers_expired, 0u);
  dispatcher_->Expire(170 * kMs);
  EXPECT_FALSE(ports_->Lookup(w).has_value());
  EXPECT_FALSE(program_->BoundFlow(1).has_value());  // the program forgot its flow
  EXPECT_EQ(dispatcher_->counters().peers_expired, 1u);
  EXPECT_TRUE(ports_->Lookup(ps_).has_value());  // static: never expires
  From(w, 180 * kMs);
  EXPECT_EQ(ports_->Lookup(w), std::optional<dp::PortId>(1));
}

TEST_F(OlafDispatcherTest, WithNoFreePortOnlyAnOperatorMappedPeerGetsOneFromTheSilentest) {
  Make(/*max_bound=*/3);  // the PS and two peers
  const net::Endpoint a = Ep("198.18.0.10:5000"), b = Ep("198.18.0.11:5000");
  From(a, 0);
  From(b, 10 * kMs);
  const uint64_t rx = program_->counters().rx_packets;
  From(Ep("198.18.0.12:5000"), 20 * kMs);  // unmapped: dropped, nobody evicted
  EXPECT_EQ(dispatcher_->counters().ports_exhausted, 1u);
  EXPECT_EQ(program_->counters().rx_packets, rx);
  ASSERT_TRUE(program_->cluster_table().Set(6000, 3).ok());
  const net::Endpoint mapped = Ep("198.18.0.13:6000");
  From(mapped, 30 * kMs);
  EXPECT_EQ(dispatcher_->counters().peers_evicted, 1u);
  EXPECT_FALSE(ports_->Lookup(a).has_value());  // a was silent longest
  EXPECT_TRUE(ports_->Lookup(b).has_value());
  EXPECT_TRUE(ports_->Lookup(mapped).has_value());
  // Every dynamic peer but b is mapped now; a second mapped newcomer takes b's
  // port, a third finds only mapped peers and is dropped.
  ASSERT_TRUE(program_->cluster_table().Set(6001, 3).ok());
  ASSERT_TRUE(program_->cluster_table().Set(6002, 3).ok());
  From(Ep("198.18.0.14:6001"), 40 * kMs);
  EXPECT_FALSE(ports_->Lookup(b).has_value());
  From(Ep("198.18.0.15:6002"), 50 * kMs);
  EXPECT_EQ(dispatcher_->counters().peers_evicted, 2u);
  EXPECT_EQ(dispatcher_->counters().ports_exhausted, 2u);
}

}  // namespace
}  // namespace inca::switchd
