#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "control/grpc_server.h"
#include "inca/control/control_plane.h"

namespace inca::control {
namespace {

using ::testing::HasSubstr;

// An in-memory CAIS control plane: just a rule table and a config map.
class FakePlane final : public ControlPlane, public CaisControlPlane {
 public:
  std::string program() const override { return "cais"; }
  CaisControlPlane* cais() override { return this; }
  absl::Status AddRule(const cais::Rule& r) override { return rules_.Add(r); }
  absl::Status DeleteRule(const cais::RuleKey& k) override { return rules_.Delete(k); }
  absl::StatusOr<std::vector<cais::Rule>> DumpRules() override { return rules_.Dump(); }
  absl::StatusOr<std::vector<PortInfo>> ListPorts() override {
    return std::vector<PortInfo>{{3, "127.0.0.1:7000", true}};
  }
  absl::Status RegisterPort(uint16_t, const std::string& ep) override {
    if (ep.empty()) return absl::InvalidArgumentError("endpoint is empty");
    return absl::OkStatus();
  }
  absl::StatusOr<GroupInfo> CreateGroup(uint8_t g, const std::vector<uint16_t>& ports) override {
    GroupInfo info;
    info.group_id = g;
    info.world_size = static_cast<uint16_t>(ports.size());
    info.rank_ports = ports;
    info.formed = true;
    info.source = "control";
    return info;
  }
  absl::Status DestroyGroup(uint8_t) override { return absl::NotFoundError("no such group"); }
  absl::StatusOr<std::vector<GroupInfo>> ListGroups() override { return std::vector<GroupInfo>{}; }
  // Echoes the install as the group it forms.
  absl::StatusOr<GroupInfo> InstallTree(const TreeInstall& t) override {
    return GroupInfo{.group_id = t.group_id,
                     .world_size = t.world_size,
                     .rank_ports = t.rank_ports,
                     .formed = true,
                     .seq_base = t.seq_base,
                     .job = t.job,
                     .members = {{1, t.members.at(0), "198.18.1.10:5000"}},
                     .tree = true,
                     .tree_members = t.members,
                     .uplink = t.uplink,
                     .source = "join",
                     .timings = {},
                     .contended = false};
  }
  absl::StatusOr<std::map<std::string, std::string>> GetConfig() override { return config_; }
  absl::Status SetConfig(const std::map<std::string, std::string>& v) override {
    for (const auto& [k, val] : v) {
      if (k != "timeout_ms") return absl::InvalidArgumentError("unknown key " + k);
      config_[k] = val;
    }
    return absl::OkStatus();
  }
  absl::StatusOr<Stats> GetStats() override {
    Stats s;
    s.sram_usage = 0.5;
    s.counters.cais.completed_chunks = 42;
    s.drops["duplicate"] = 3;
    GroupStats g;
    g.group_id = 7;
    g.counters.rx_packets = 10;
    g.counters.completed_chunks = 9;
    g.counters.sram_cells = 4;
    s.groups.push_back(g);
    return s;
  }
  absl::Status Health() override {
    std::unique_lock lock(mu_);
    if (!hold_) return absl::OkStatus();
    max_in_health_ = std::max(max_in_health_, ++in_health_);
    changed_.notify_all();
    changed_.wait_for(lock, std::chrono::seconds(20), [&] { return !hold_; });
    --in_health_;
    return absl::OkStatus();
  }
  // While held, Health() calls wait inside the plane (a slow handler).
  void Hold(bool on) {
    std::lock_guard lock(mu_);
    hold_ = on;
    changed_.notify_all();
  }
  // Waits (bounded) until `pred(calls now inside Health)` holds.
  template <typename Pred>
  bool WaitInHealth(Pred pred) {
    std::unique_lock lock(mu_);
    return changed_.wait_for(lock, std::chrono::seconds(20), [&] { return pred(in_health_); });
  }
  void Poke() { changed_.notify_all(); }
  int max_in_health() {
    std::lock_guard lock(mu_);
    return max_in_health_;
  }
  absl::Status SetOffloadPolicy(const OffloadPolicy& p) override {
    policy_ = p;
    policy_.updated_unix_ms = 1234;
    return absl::OkStatus();
  }
  absl::StatusOr<OffloadPolicy> GetOffloadPolicy() override { return policy_; }

 private:
  OffloadPolicy policy_;
  std::mutex mu_;
  std::condition_variable changed_;
  bool hold_ = false;
  int in_health_ = 0, max_in_health_ = 0;
  cais::RuleTable rules_{16};
  std::map<std::string, std::string> config_{{"timeout_ms", "50"}};
};

struct Served {
  FakePlane plane;
  std::unique_ptr<ControlServer> server;
  std::unique_ptr<ControlClient> client;
  explicit Served(std::string token = "", std::string client_token = "") {
    ControlServerOptions o;
    o.listen = "127.0.0.1:0";
    o.token = token;
    auto s = ControlServer::Start(o, &plane);
    EXPECT_TRUE(s.ok()) << s.status();
    server = std::move(*s);
    client = *ConnectControl(absl::StrCat("127.0.0.1:", server->port()), client_token);
  }
};

TEST(ControlGrpcTest, RulesRoundTripThroughTheService) {
  Served sv;
  const cais::Rule seed{{0, 5, 0}, {1, 2, 3, 4}, {1, 2, 3, 4}, wire::CaisOp::kAllReduce};
  ASSERT_TRUE(sv.client->AddRule(seed).ok());
  const cais::Rule wild{{1, std::nullopt, std::nullopt}, {0, 1}, {0, 1}, std::nullopt};
  ASSERT_TRUE(sv.client->AddRule(wild).ok());
  auto rules = sv.client->DumpRules();
  ASSERT_TRUE(rules.ok()) << rules.status();
  ASSERT_EQ(rules->size(), 2u);
  EXPECT_EQ((*rules)[0], seed);
  EXPECT_EQ((*rules)[1], wild);  // wildcards and op "any" survive the trip
  ASSERT_TRUE(sv.client->DeleteRule(seed.key).ok());
  EXPECT_EQ(sv.client->DumpRules()->size(), 1u);
}

TEST(ControlGrpcTest, StatusCodesAndMessagesPassThrough) {
  Served sv;
  const cais::Rule r{{0, 5, 0}, {1}, {1}, wire::CaisOp::kAllReduce};
  ASSERT_TRUE(sv.client->AddRule(r).ok());
  absl::Status s = sv.client->AddRule(r);
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(s.message(), HasSubstr("delete it first"));
  s = sv.client->DeleteRule({0, 9, 9});
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  s = sv.client->SetConfig({{"bogus", "1"}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("bogus"));
  ASSERT_TRUE(sv.client->SetConfig({{"timeout_ms", "80"}}).ok());
  EXPECT_EQ(sv.client->GetConfig()->at("timeout_ms"), "80");
  // Issue 46: a key of 10 KB echoed back in the error made the reply's
  // metadata larger than the client accepts ("initial metadata size exceeds
  // limit"); the echo is cut instead, and the error still arrives.
  const std::string huge(10000, 'k');
  s = sv.client->SetConfig({{huge, "1"}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s.message().substr(0, 200);
  EXPECT_THAT(s.message(), HasSubstr("unknown key kkkk"));
  EXPECT_THAT(s.message(), HasSubstr("(cut: the message was 10012 bytes)"));
  EXPECT_LT(s.message().size(), 1200u);
}

TEST(ControlGrpcTest, StatsAndGroupsConvert) {
  Served sv;
  auto st = sv.client->GetStats();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->counters.cais.completed_chunks, 42u);
  EXPECT_EQ(st->drops.at("duplicate"), 3u);
  ASSERT_EQ(st->groups.size(), 1u);
  EXPECT_EQ(st->groups[0].counters.sram_cells, 4u);
  auto g = sv.client->CreateGroup(9, {4, 5, 6});
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->rank_ports, (std::vector<uint16_t>{4, 5, 6}));
  EXPECT_EQ(g->source, "control");
  EXPECT_TRUE(sv.client->Health().ok());
}

TEST(ControlGrpcTest, TokenIsRequiredWhenConfigured) {
  Served without("s3cret", "");
  absl::Status s = without.client->Health();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(s.message(), HasSubstr("token"));
  EXPECT_EQ(without.client->DumpRules().status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(s.message(), HasSubstr("requires a token"));
  Served wrong("s3cret", "guess");
  absl::Status w = wrong.client->Health();
  EXPECT_EQ(w.code(), absl::StatusCode::kUnauthenticated);
  // A wrong token is told apart from a missing one (issue 18).
  EXPECT_THAT(w.message(), HasSubstr("token rejected"));
  Served right("s3cret", "s3cret");
  EXPECT_TRUE(right.client->Health().ok());
}

// Issue 46: a token with a newline, a carriage return, DEL or a non-ASCII
// byte made gRPC abort the process (a metadata value must be printable
// ASCII). One rule refuses it wherever it enters, without echoing it.
TEST(ControlGrpcTest, ATokenThatIsNotPrintableAsciiIsRefusedNotAborted) {
  EXPECT_TRUE(ValidateControlToken("").ok());
  EXPECT_TRUE(ValidateControlToken("s3cret with spaces ~!").ok());
  for (const std::string& bad :
       {std::string("s3cret\n"), std::string("a\rb"), std::string("x\x7f"),
        std::string("caf\xc3\xa9"), std::string("t\tab"), std::string("nul\0byte", 8)}) {
    const absl::Status s = ValidateControlToken(bad, "INCA_TOKEN");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), HasSubstr("INCA_TOKEN: byte "));
    EXPECT_THAT(s.message(), HasSubstr("printable ASCII"));
    EXPECT_THAT(s.message(), ::testing::Not(HasSubstr(bad)));
    // The client: refused before any call (it was an abort in gRPC's
    // metadata check on the first call).
    auto c = ConnectControl("127.0.0.1:50051", bad);
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    // The server: refused at start.
    ControlServerOptions o;
    o.listen = "127.0.0.1:0";
    o.token = bad;
    FakePlane plane;
    auto srv = ControlServer::Start(o, &plane);
    EXPECT_EQ(srv.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(srv.status().message(), HasSubstr("--control-token"));
  }
  EXPECT_THAT(ValidateControlToken("ab\ncd").message(), HasSubstr("byte 3 of the token is 0x0a"));
}

TEST(ControlGrpcTest, ATreeInstallAndItsGroupConvertBothWays) {
  Served sv;
  TreeInstall t{7, 0xABCDEF12345ULL, 130, 0x9000'0000, {3, 5, 900}, uint16_t{901}, {}};
  t.rank_ports.assign(130, 901);
  t.rank_ports[0] = 3;
  auto g = sv.client->InstallTree(t);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->group_id, 7);
  EXPECT_EQ(g->world_size, 130);
  EXPECT_EQ(g->job, 0xABCDEF12345ULL);
  EXPECT_EQ(g->seq_base, 0x9000'0000u);
  EXPECT_EQ(g->rank_ports, t.rank_ports);
  EXPECT_TRUE(g->tree);
  EXPECT_EQ(g->tree_members, (std::vector<uint16_t>{3, 5, 900}));
  EXPECT_EQ(g->uplink, uint16_t{901});
  ASSERT_EQ(g->members.size(), 1u);
  EXPECT_EQ(g->members[0].endpoint, "198.18.1.10:5000");
  // Out of range on the wire: refused before the plane, naming the field.
  t.world_size = 0;
  EXPECT_THAT(sv.client->InstallTree(t).status().message(), HasSubstr("world_size 0"));
  t.world_size = 4;
  t.uplink = 1024;
  const absl::Status s = sv.client->InstallTree(t).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("uplink port 1024 is out of range"));
}

TEST(ControlGrpcTest, InvalidInputFromTheWireIsRejectedWithReason) {
  Served sv;
  cais::Rule bad{{0, 5, 0}, {}, {1}, wire::CaisOp::kAllReduce};
  const absl::Status s = sv.client->AddRule(bad);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("no input ports"));
}

// Issue 18 ("connections and message sizes on gRPC"): a request over the
// size limit is refused without reaching the plane, and a burst of calls
// to a slow handler gets at most max_threads handler threads; the rest are
// refused with RESOURCE_EXHAUSTED instead of piling up. The server answers
// normally afterwards.
TEST(ControlGrpcTest, OversizedRequestsAndBurstsAreRefusedNotQueued) {
  Served sv;
  const absl::Status big =
      sv.client->SetConfig({{"timeout_ms", std::string(size_t{2} << 20, '7')}});
  EXPECT_EQ(big.code(), absl::StatusCode::kResourceExhausted) << big;
  auto config = sv.client->GetConfig();
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->at("timeout_ms"), "50");  // untouched

  constexpr int kCalls = 64;
  const int limit = ControlServerOptions{}.max_threads;
  sv.plane.Hold(true);
  std::atomic<int> ok{0}, refused{0}, other{0};
  std::vector<std::thread> burst;
  for (int i = 0; i < kCalls; ++i) {
    burst.emplace_back([&] {
      const absl::Status s = sv.client->Health();
      (s.ok() ? ok : s.code() == absl::StatusCode::kResourceExhausted ? refused : other)++;
      sv.plane.Poke();
    });
  }
  // Every call is either inside the plane or already refused.
  EXPECT_TRUE(sv.plane.WaitInHealth([&](int in) { return in + refused.load() >= kCalls; }) ||
              refused.load() > 0)
      << "in the plane: " << sv.plane.max_in_health() << ", refused: " << refused.load();
  sv.plane.Hold(false);
  for (auto& t : burst) t.join();
  EXPECT_EQ(other.load(), 0);
  EXPECT_GT(refused.load(), 0);
  EXPECT_LE(sv.plane.max_in_health(), limit);
  EXPECT_EQ(ok.load() + refused.load(), kCalls);
  EXPECT_TRUE(sv.client->Health().ok());
}

TEST(ControlGrpcTest, TheOtherProgramsCallsAreFailedPreconditionNamingBoth) {
  Served sv;  // a plane with the CAIS facet only
  const absl::Status s = sv.client->SetClusterMapping(7000, 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("runs the cais program"));
  EXPECT_THAT(s.message(), HasSubstr("--program olaf"));
  EXPECT_EQ(sv.client->GetOlafStats().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(sv.client->ListGroups().ok());  // its own facet answers
}

TEST(ControlGrpcTest, PortConflictAndUnreachableDeviceAreClearErrors) {
  Served sv;
  ControlServerOptions o;
  o.listen = absl::StrCat("127.0.0.1:", sv.server->port());
  FakePlane other;
  auto second = ControlServer::Start(o, &other);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(), HasSubstr("--control-listen"));

  sv.server.reset();  // nothing listens there now
  auto gone = ConnectControl(o.listen, "", 300);
  ASSERT_TRUE(gone.ok());
  const absl::Status s = (*gone)->Health();
  EXPECT_TRUE(s.code() == absl::StatusCode::kUnavailable ||
              s.code() == absl::StatusCode::kDeadlineExceeded)
      << s;
  EXPECT_THAT(s.message(), HasSubstr("cannot reach"));
  EXPECT_EQ(ConnectControl("nocolon", "").status().code(), absl::StatusCode::kInvalidArgument);
  // A port that is not a number, or 0, is a usage error, not "unreachable".
  for (const char* bad : {"127.0.0.1:abc", "127.0.0.1:0", "127.0.0.1:70000", ":50051", "::1:5"}) {
    auto c = ConnectControl(bad, "");
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_TRUE(ConnectControl("[::1]:50051", "").ok());
  EXPECT_TRUE(ConnectControl("localhost:50051", "").ok());
}

// Issue 46, restart: a switch that dies (or stops) while a control client
// is connected leaves its end of that connection behind (FIN-WAIT-2 while
// the client keeps its end open, then TIME-WAIT). The restarted switch must
// serve on the same port at once, as gRPC's own SO_REUSEADDR listener can;
// the pre-check used to call the port taken for 60-70 s.
TEST(ControlGrpcTest, ARestartServesAtOnceWhileTheOldConnectionLingers) {
  // The dead switch's state, made directly: a listener (SO_REUSEADDR, as
  // gRPC's) accepted a connection and closed first; the client still holds
  // its end.
  const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  const int one = 1;
  ASSERT_EQ(setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)), 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(sa);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&sa), &len), 0);
  ASSERT_EQ(listen(listener, 4), 0);
  const int client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  const int accepted = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  ASSERT_GE(accepted, 0);
  close(accepted);  // the switch's end goes first: FIN-WAIT-2
  close(listener);
  ControlServerOptions o;
  o.listen = absl::StrCat("127.0.0.1:", ntohs(sa.sin_port));
  FakePlane plane;
  auto restarted = ControlServer::Start(o, &plane);
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  auto c = ConnectControl(o.listen, "");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE((*c)->Health().ok());

  // The same through gRPC itself: a graceful stop (the switch's SIGTERM)
  // with a client connected, and a start on the same port straight after.
  restarted->reset();
  auto again = ControlServer::Start(o, &plane);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE((*c)->Health().ok());
  close(client);
}

TEST(ControlGrpcTest, OffloadPolicyRoundTripsThroughTheService) {
  Served sv;
  OffloadPolicy p;
  p.controller = "test";
  p.threshold = 0.4;
  p.fallback_alarm = true;
  p.queue_delay_us = 12.5;
  p.groups.push_back({3, 4, 1000, UINT64_MAX});
  p.groups.push_back({9, 2, 1, 0});
  p.fallback_ratio = 0.125;
  p.groups[1].fallback_ratio = 0.5;
  p.groups[1].fallback_hold = true;
  p.groups[0].measured_bins = 0x3u << 20;
  p.groups[0].offload_bins = 0x1u << 20;
  p.groups[0].borrowed_bins = (0x1u << 21) | (0x1u << 30);  // 2^30: not measured, dropped
  ASSERT_TRUE(sv.client->SetOffloadPolicy(p).ok());
  auto got = sv.client->GetOffloadPolicy();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->controller, "test");
  EXPECT_DOUBLE_EQ(got->threshold, 0.4);
  EXPECT_TRUE(got->fallback_alarm);
  EXPECT_EQ(got->updated_unix_ms, 1234);
  ASSERT_EQ(got->groups.size(), 2u);
  EXPECT_EQ(got->groups[0].group_id, 3);
  EXPECT_EQ(got->groups[0].participants, 4);
  EXPECT_EQ(got->groups[0].min_bytes, 1000u);
  EXPECT_EQ(got->groups[0].max_bytes, UINT64_MAX);
  EXPECT_EQ(got->groups[1].min_bytes, 1u);
  EXPECT_EQ(got->groups[1].max_bytes, 0u);
  EXPECT_EQ(got->groups[0].measured_bins, 0x3u << 20);
  EXPECT_EQ(got->groups[0].offload_bins, 0x1u << 20);
  EXPECT_EQ(got->groups[0].borrowed_bins, 0x1u << 21);
  EXPECT_DOUBLE_EQ(got->fallback_ratio, 0.125);
  EXPECT_FALSE(got->groups[0].fallback_hold);
  EXPECT_TRUE(got->groups[1].fallback_hold);
  EXPECT_DOUBLE_EQ(got->groups[1].fallback_ratio, 0.5);
  // A ratio that is not one is refused with the field named.
  for (double bad : {-0.5, 1.5, std::nan("")}) {
    p.groups[1].fallback_ratio = bad;
    const absl::Status s = sv.client->SetOffloadPolicy(p);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), HasSubstr("group 9 fallback_ratio")) << s;
  }
}

}  // namespace
}  // namespace inca::control
