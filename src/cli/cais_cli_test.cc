// cais-cli against a real SwitchServer with its embedded control service.
#include "cli/cais_cli.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "inca/wire/cais.h"
#include "inca/wire/mgmt.h"
#include "switchd/control_service.h"
#include "switchd/switch_server.h"

namespace inca::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class CaisCliTest : public ::testing::Test {
 protected:
  void Start(const std::string& token = "") {
    switchd::SwitchdConfig c;
    c.listen = "127.0.0.1:0";
    auto s = switchd::SwitchServer::Create(c);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    auto svc = switchd::StartControlService(server_.get(), "127.0.0.1:0", token);
    ASSERT_TRUE(svc.ok()) << svc.status();
    control_ = std::move(*svc);
    device_ = absl::StrCat("127.0.0.1:", control_.server->port());
    thread_ = std::thread([this] { (void)server_->Run(); });
  }
  void TearDown() override {
    if (server_) {
      server_->Stop();
      thread_.join();
      control_ = {};
    }
  }
  // Runs cais-cli with `args` (then --device), returns the exit code.
  int Cli(std::vector<std::string> args, bool with_device = true) {
    if (with_device) {
      args.push_back("--device");
      args.push_back(device_);
    }
    std::vector<const char*> argv = {"cais-cli"};
    for (const auto& a : args) argv.push_back(a.c_str());
    out_.str("");
    err_.str("");
    return RunCaisCli(static_cast<int>(argv.size()), argv.data(), out_, err_);
  }

  std::unique_ptr<switchd::SwitchServer> server_;
  switchd::ControlService control_;
  std::thread thread_;
  std::string device_;
  std::ostringstream out_, err_;
};

TEST_F(CaisCliTest, SeedCommandsWorkAsWritten) {
  Start();
  ASSERT_EQ(
      Cli({"add-rule", "--group-id", "0", "--layer-id", "5", "--chunk-id", "0", "--input-ports",
           "1,2,3,4", "--output-ports", "1,2,3,4", "--op-type", "allreduce"}),
      0)
      << err_.str();
  ASSERT_EQ(Cli({"dump-rules"}), 0) << err_.str();
  EXPECT_THAT(out_.str(),
              HasSubstr("0      5      0      1,2,3,4           1,2,3,4           allreduce"));
  ASSERT_EQ(Cli({"show-stats"}), 0) << err_.str();
  for (const char* line : {"Device: ", "SRAM Usage: ", "Reduce Throughput: ", "Avg Queue Delay: ",
                           "Slot Holding: ", "Fallback Ratio: "}) {
    EXPECT_THAT(out_.str(), HasSubstr(line));
  }
  // Issue 17: queue delay is the switch's own, slot holding apart, and
  // without a controller the fallback ratio is since start.
  EXPECT_THAT(out_.str(), HasSubstr("us (in the switch: kernel receive to pipeline)"));
  EXPECT_THAT(out_.str(), HasSubstr("% since start"));
  EXPECT_THAT(out_.str(), HasSubstr("us avg, p50 0.0, p99 0.0us (first contribution"));
  // With a controller: its window, and the since-start figure beside it.
  control::OffloadPolicy p;
  p.controller = "unit";
  p.fallback_ratio = 0.25;
  p.fallback_alarm = true;
  ASSERT_TRUE(control_.plane->SetOffloadPolicy(p).ok());
  ASSERT_EQ(Cli({"show-stats"}), 0) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("Fallback Ratio: 25.0% over the last 10 s (since start 0.0%)"));
  EXPECT_THAT(out_.str(), HasSubstr("ALERT"));
  ASSERT_EQ(Cli({"show-stats", "--json"}), 0) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("\"fallback_ratio_window\":0.25,\"fallback_alarm\":true"));
  EXPECT_THAT(out_.str(), HasSubstr("\"slot_holding_avg_us\":"));
  EXPECT_THAT(out_.str(), HasSubstr("\"slot_holding_p99_us\":"));
}

TEST_F(CaisCliTest, OffloadShowsTheControllersDecisions) {
  Start();
  ASSERT_EQ(Cli({"offload"}), 0) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("No offload decisions yet"));
  control::OffloadPolicy p;
  p.controller = "unit";
  p.threshold = 0.4;
  p.groups.push_back({2, 4, 65536, UINT64_MAX});
  p.groups.push_back({7, 2, 1, 0});
  p.groups.push_back({8, 4, 1, 0});
  p.groups.back().fallback_hold = true;
  p.groups.back().fallback_ratio = 0.3;
  // Per size class: measured on the host path, on the switch as a nearby
  // size, and one operation explored on the host path.
  p.groups[0].measured_bins = (1u << 12) | (1u << 20);
  p.groups[0].offload_bins = 1u << 20;
  p.groups[0].borrowed_bins = 1u << 20;
  p.groups[0].explore_bins = 1u << 24;
  ASSERT_TRUE(control_.plane->SetOffloadPolicy(p).ok());
  ASSERT_EQ(Cli({"offload"}), 0) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("Controller: unit"));
  EXPECT_THAT(out_.str(), HasSubstr("group 2 (4 ranks): offload 65536..inf bytes"));
  EXPECT_THAT(out_.str(), HasSubstr("  sizes 2^12 B: host path (measured)\n"));
  EXPECT_THAT(out_.str(), HasSubstr("  sizes 2^20 B: switch (measured, as a nearby size"));
  EXPECT_THAT(out_.str(), HasSubstr("  sizes 2^24 B: host path for its next operation (explore)"));
  EXPECT_THAT(out_.str(), HasSubstr("group 7 (2 ranks): OFF (host path)\n"));
  EXPECT_THAT(out_.str(), HasSubstr("group 8 (4 ranks): OFF (host path): fallback hold, 30.0% of "
                                    "its chunks fell back in the window"));
  ASSERT_EQ(Cli({"offload", "--json"}), 0) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("\"controller\":\"unit\""));
  EXPECT_THAT(out_.str(), HasSubstr("{\"group\":7,\"participants\":2,\"offload\":false"));
  // The switch refuses names that would need escaping.
  p.controller = "bad name\"";
  EXPECT_EQ(control_.plane->SetOffloadPolicy(p).code(), absl::StatusCode::kInvalidArgument);
}

// A tree's rule (docs/design/tree.md) through the control API both ways.
TEST_F(CaisCliTest, ARuleWithAnUplinkRoundTripsAndAnUplinkAmongItsPortsIsRefused) {
  Start();
  ASSERT_EQ(Cli({"add-rule", "--group-id", "2", "--input-ports", "0,1", "--op-type", "any",
                 "--uplink", "9"}),
            0)
      << err_.str();
  ASSERT_EQ(Cli({"dump-rules", "--json"}), 0);
  EXPECT_THAT(out_.str(), HasSubstr("\"uplink\":9,\"rank_ports\":[]}"));
  ASSERT_EQ(Cli({"dump-rules"}), 0);
  EXPECT_THAT(out_.str(), HasSubstr("any       switch  9"));
  EXPECT_EQ(Cli({"add-rule", "--group-id", "3", "--input-ports", "0,1", "--uplink", "1"}), 1);
  EXPECT_THAT(err_.str(), HasSubstr("uplink port 1"));
  ASSERT_EQ(Cli({"show-tree", "--group-id", "2"}), 0) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("below a parent, uplink port 9 -> unbound"));
  EXPECT_THAT(out_.str(), HasSubstr("members (reduction order): 0=unbound 1=unbound"));
  EXPECT_EQ(Cli({"show-tree", "--group-id", "3"}), 1);
  EXPECT_THAT(err_.str(), HasSubstr("group 3 has no group-wide reduction rule"));
}

TEST_F(CaisCliTest, HostPathRulePinsALayerWithoutPorts) {
  Start();
  ASSERT_EQ(
      Cli({"add-rule", "--group-id", "0", "--layer-id", "5", "--op-type", "any", "--host-path"}), 0)
      << err_.str();
  ASSERT_EQ(Cli({"dump-rules"}), 0) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("any       host"));
  ASSERT_EQ(Cli({"dump-rules", "--json"}), 0);
  EXPECT_THAT(out_.str(), HasSubstr("\"layer_id\":\"5\""));
  EXPECT_THAT(out_.str(), HasSubstr("\"host_path\":true"));
  // A reduction rule still needs its ports; outputs default to the inputs.
  EXPECT_EQ(Cli({"add-rule", "--group-id", "1"}), 2);
  EXPECT_THAT(err_.str(), HasSubstr("--input-ports"));
  ASSERT_EQ(Cli({"add-rule", "--group-id", "1", "--input-ports", "0,1"}), 0) << err_.str();
  ASSERT_EQ(Cli({"dump-rules"}), 0);
  EXPECT_THAT(out_.str(), HasSubstr("1      *      *      0,1               0,1               "
                                    "allreduce switch"));
}

TEST_F(CaisCliTest, WildcardsDeleteAndJson) {
  Start();
  ASSERT_EQ(Cli({"add-rule", "--group-id", "3", "--input-ports", "0,1", "--output-ports", "0,1",
                 "--op-type", "any"}),
            0)
      << err_.str();
  ASSERT_EQ(Cli({"dump-rules", "--json"}), 0);
  EXPECT_THAT(out_.str(), HasSubstr("\"group_id\":3,\"layer_id\":\"*\",\"chunk_id\":\"*\""));
  EXPECT_THAT(out_.str(), HasSubstr("\"op_type\":\"any\""));
  EXPECT_EQ(Cli({"del-rule", "--group-id", "3"}), 0) << err_.str();
  EXPECT_EQ(Cli({"del-rule", "--group-id", "3"}), 1);
  EXPECT_THAT(err_.str(), HasSubstr("no rule for group 3 layer * chunk *"));
}

TEST_F(CaisCliTest, ErrorsAreOneLineWithExitCodes) {
  Start();
  const std::vector<std::string> rule = {"add-rule", "--group-id",    "0",   "--layer-id",
                                         "5",        "--input-ports", "1,2", "--output-ports",
                                         "1,2"};
  ASSERT_EQ(Cli(rule), 0);
  EXPECT_EQ(Cli(rule), 1);  // refused by the switch
  EXPECT_THAT(err_.str(), HasSubstr("already installed"));
  const std::string e = err_.str();
  EXPECT_EQ(std::count(e.begin(), e.end(), '\n'), 1);
  EXPECT_EQ(Cli({"add-rule", "--group-id", "0", "--input-ports", "1,1024", "--output-ports", "1"}),
            2);  // bad usage
  EXPECT_THAT(err_.str(), HasSubstr("'1024' is not a port number 0..1023"));
  EXPECT_EQ(Cli({"add-rule", "--group-id", "0", "--input-ports", "1", "--output-ports", "1",
                 "--op-type", "gather"}),
            2);
  EXPECT_EQ(Cli({"frobnicate"}), 2);
  // Issue 18: each of these was accepted (or dialled port 0 and reported
  // "unreachable"); each is now one line and exit 2.
  const auto one_line_usage = [&](std::vector<std::string> args, bool with_device,
                                  const char* says) {
    EXPECT_EQ(Cli(std::move(args), with_device), 2) << says;
    const std::string text = err_.str();
    EXPECT_THAT(text, HasSubstr(says));
    EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  };
  one_line_usage({"add-rule", "--group-id", "0", "--input-ports", "1,1,1"}, true,
                 "port 1 is listed twice");
  one_line_usage({"groups", "create", "--group-id", "4", "--ports", "2,3,2"}, true,
                 "port 2 is listed twice");
  // Issue 46: an empty entry was skipped (rule over ports 1 and 2).
  one_line_usage({"add-rule", "--group-id", "0", "--input-ports", "1,,2"}, true,
                 "--input-ports: '1,,2' has an empty entry");
  one_line_usage({"add-rule", "--group-id", "0", "--input-ports", "1", "--output-ports", "1,"},
                 true, "has an empty entry");
  one_line_usage({"health", "--timeout-ms", "-5"}, true, "--timeout-ms");
  one_line_usage({"health", "--device", "127.0.0.1:abc"}, false, "port in 1..65535");
  one_line_usage({"health", "--device", "127.0.0.1:0"}, false, "port in 1..65535");
}

TEST_F(CaisCliTest, ConfigureValidatesKeys) {
  Start();
  ASSERT_EQ(Cli({"configure", "timeout_ms=80", "offload_threshold=0.3"}), 0) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("timeout_ms = 80"));
  EXPECT_THAT(out_.str(), HasSubstr("offload_threshold = 0.3"));
  EXPECT_EQ(server_->reducer().config().timeout_ns, 80'000'000);
  EXPECT_EQ(Cli({"configure", "bogus=1"}), 1);
  EXPECT_THAT(err_.str(), HasSubstr("unknown key 'bogus'"));
  EXPECT_EQ(Cli({"configure", "chunk_size=1024"}), 1);
  EXPECT_THAT(err_.str(), HasSubstr("restart"));
  EXPECT_EQ(Cli({"configure", "sram_usage_limit=1.5"}), 1);
  EXPECT_THAT(err_.str(), HasSubstr("sram_usage_limit"));
  EXPECT_EQ(Cli({"configure", "timeout_ms"}), 2);
}

TEST_F(CaisCliTest, TokenIsEnforced) {
  Start("t0ken");
  EXPECT_EQ(Cli({"dump-rules"}), 1);
  EXPECT_THAT(err_.str(), HasSubstr("requires a token"));
  EXPECT_EQ(Cli({"dump-rules", "--token", "guess"}), 1);
  EXPECT_THAT(err_.str(), HasSubstr("token rejected"));
  EXPECT_EQ(Cli({"dump-rules", "--token", "t0ken"}), 0) << err_.str();
}

// Issue 46: such a token aborted cais-cli inside gRPC; now it is a usage
// error, one line, from the flag or from INCA_TOKEN.
TEST_F(CaisCliTest, ATokenThatIsNotPrintableAsciiIsAUsageError) {
  Start("t0ken");
  for (const char* bad : {"t0ken\n", "t0\rken", "t0ken\x7f", "t\xc3\xb6ken"}) {
    EXPECT_EQ(Cli({"health", "--token", bad}), 2) << bad;
    const std::string e = err_.str();
    EXPECT_THAT(e, HasSubstr("printable ASCII"));
    EXPECT_EQ(std::count(e.begin(), e.end(), '\n'), 1) << e;
    ASSERT_EQ(setenv("INCA_TOKEN", bad, 1), 0);
    EXPECT_EQ(Cli({"health"}), 2) << bad;
    EXPECT_THAT(err_.str(), HasSubstr("printable ASCII"));
    unsetenv("INCA_TOKEN");
  }
  EXPECT_EQ(Cli({"health", "--token", "t0ken"}), 0) << err_.str();
}

TEST_F(CaisCliTest, UnreachableDevice) {
  Start();
  const std::string dead = absl::StrCat("127.0.0.1:", control_.server->port());
  control_ = {};  // stop the control service
  EXPECT_EQ(Cli({"health", "--device", dead, "--timeout-ms", "300"}, false), 3);
  EXPECT_THAT(err_.str(), HasSubstr("cannot reach"));
}

// --device a,b: the command on each switch a job stripes over, in order.
TEST_F(CaisCliTest, ADeviceListRunsTheCommandOnEverySwitch) {
  Start();
  switchd::SwitchdConfig c;
  c.listen = "127.0.0.1:0";
  auto second = switchd::SwitchServer::Create(c);
  ASSERT_TRUE(second.ok()) << second.status();
  auto svc = switchd::StartControlService(second->get(), "127.0.0.1:0", "");
  ASSERT_TRUE(svc.ok()) << svc.status();
  std::thread run([&] { (void)(*second)->Run(); });
  const std::string other = absl::StrCat("127.0.0.1:", svc->server->port());
  const std::string both = absl::StrCat(device_, ",", other);
  EXPECT_EQ(Cli({"add-rule", "--group-id", "3", "--input-ports", "1,2", "--device", both}, false),
            0)
      << err_.str();
  // Installed on both: each switch lists it.
  for (const std::string& d : {device_, other}) {
    ASSERT_EQ(Cli({"dump-rules", "--device", d}, false), 0) << err_.str();
    EXPECT_THAT(out_.str(), HasSubstr("1,2")) << d;
  }
  ASSERT_EQ(Cli({"show-stats", "--json", "--device", both}, false), 0) << err_.str();
  const std::string json = out_.str();
  EXPECT_EQ(std::count(json.begin(), json.end(), '\n'), 2) << json;
  EXPECT_THAT(json, HasSubstr(absl::StrCat("\"device\":\"", device_)));
  EXPECT_THAT(json, HasSubstr(absl::StrCat("\"device\":\"", other)));
  ASSERT_EQ(Cli({"health", "--device", both}, false), 0) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr(absl::StrCat("== ", other)));
  (*second)->Stop();
  run.join();
}

TEST_F(CaisCliTest, RulesInstalledByTheCliReduceRealPackets) {
  Start();
  // Two hosts, registered as switch ports 1 and 2, then a group over them.
  int fd[2];
  for (int i = 0; i < 2; ++i) {
    fd[i] = socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(bind(fd[i], reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    socklen_t len = sizeof(a);
    getsockname(fd[i], reinterpret_cast<sockaddr*>(&a), &len);
    ASSERT_EQ(Cli({"ports", "register", "--port", absl::StrCat(i + 1), "--endpoint",
                   absl::StrCat("127.0.0.1:", ntohs(a.sin_port))}),
              0)
        << err_.str();
  }
  ASSERT_EQ(Cli({"groups", "create", "--group-id", "9", "--ports", "1,2"}), 0) << err_.str();
  ASSERT_EQ(Cli({"groups"}), 0);
  EXPECT_THAT(out_.str(), HasSubstr("group 9: 2 ranks, formed (control), ports 1,2"));
  sockaddr_in sw{};
  sw.sin_family = AF_INET;
  sw.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sw.sin_port = htons(server_->local_port());
  for (int i = 0; i < 2; ++i) {
    wire::CaisHeader h;
    h.group_id = 9;
    h.payload_len = 4;
    std::vector<uint8_t> pkt(wire::kCaisHeaderBytes + 4);
    wire::SerializeCaisHeader(h, pkt);
    const float v = static_cast<float>(i + 1);
    std::memcpy(&pkt[wire::kCaisHeaderBytes], &v, 4);
    sendto(fd[i], pkt.data(), pkt.size(), 0, reinterpret_cast<sockaddr*>(&sw), sizeof(sw));
  }
  for (int i = 0; i < 2; ++i) {
    pollfd p{fd[i], POLLIN, 0};
    ASSERT_EQ(poll(&p, 1, 5000), 1);
    uint8_t buf[64];
    const ssize_t n = recv(fd[i], buf, sizeof(buf), 0);
    ASSERT_EQ(n, static_cast<ssize_t>(wire::kCaisHeaderBytes + 4));
    float r;
    std::memcpy(&r, buf + wire::kCaisHeaderBytes, 4);
    EXPECT_EQ(r, 3.0f);
    close(fd[i]);
  }
  ASSERT_EQ(Cli({"show-stats", "--json"}), 0);
  EXPECT_THAT(out_.str(), HasSubstr("\"completed_chunks\":1"));
  EXPECT_THAT(out_.str(), Not(HasSubstr("\"conserved\":false")));
  EXPECT_EQ(Cli({"groups", "destroy", "--group-id", "9"}), 0) << err_.str();
}

// Issue 18: a JOIN-formed group could not be destroyed by an operator ("it
// dissolves when a member leaves"), so a crashed job's group stayed. Now it
// is dissolved and its ports released; the lease is a setting.
TEST_F(CaisCliTest, GroupsDestroyDissolvesAJoinFormedGroupAndLeaseIsASetting) {
  Start();
  sockaddr_in sw{};
  sw.sin_family = AF_INET;
  sw.sin_port = htons(server_->local_port());
  inet_pton(AF_INET, "127.0.0.1", &sw.sin_addr);
  int fd[2];
  // Rank `rank` of a 2-rank group from fd[rank]: sends JOIN, returns the reply.
  auto join = [&](uint8_t group, int rank) {
    wire::MgmtMessage m;
    m.type = wire::MgmtType::kJoin;
    m.group_id = group;
    m.rank = static_cast<uint16_t>(rank);
    m.world_size = 2;
    m.job = 77;
    std::vector<uint8_t> b;
    wire::SerializeMgmt(m, &b);
    sendto(fd[rank], b.data(), b.size(), 0, reinterpret_cast<sockaddr*>(&sw), sizeof(sw));
    pollfd p{fd[rank], POLLIN, 0};
    wire::MgmtMessage reply;
    uint8_t buf[128];
    if (poll(&p, 1, 5000) != 1) return reply;
    const ssize_t n = recv(fd[rank], buf, sizeof(buf), 0);
    (void)wire::ParseMgmt({buf, static_cast<size_t>(std::max<ssize_t>(n, 0))}, &reply);
    return reply;
  };
  for (int i = 0; i < 2; ++i) {
    fd[i] = socket(AF_INET, SOCK_DGRAM, 0);
    ASSERT_GE(fd[i], 0);
    const wire::MgmtMessage reply = join(12, i);
    EXPECT_EQ(reply.type, wire::MgmtType::kJoinReply);
    EXPECT_EQ(reply.status, i == 0 ? wire::MgmtStatus::kPending : wire::MgmtStatus::kOk);
    EXPECT_EQ(reply.lease_ms, 10000u);
    EXPECT_EQ(reply.window_chunks, 128);  // the switch's 128 pending chunks, one group
  }
  ASSERT_EQ(Cli({"groups", "list"}), 0) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("group 12: 2 ranks, formed (join)"));
  EXPECT_THAT(out_.str(), HasSubstr("window 128 chunks"));
  ASSERT_EQ(Cli({"configure", "advise_window=false"}), 0) << err_.str();
  ASSERT_EQ(Cli({"groups", "list", "--json"}), 0) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("\"window_chunks\":0"));
  ASSERT_EQ(Cli({"ports", "list"}), 0) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("port "));
  EXPECT_EQ(Cli({"groups", "destroy", "--group-id", "12"}), 0) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("destroyed group 12"));
  EXPECT_EQ(Cli({"groups", "destroy", "--group-id", "12"}), 1);  // gone
  EXPECT_THAT(err_.str(), HasSubstr("no group 12"));
  ASSERT_EQ(Cli({"ports", "list"}), 0) << err_.str();
  EXPECT_THAT(out_.str(), Not(HasSubstr("port ")));  // both released
  // An operator can also release a port: its groups go with it.
  EXPECT_EQ(join(13, 0).status, wire::MgmtStatus::kPending);
  EXPECT_EQ(join(13, 1).status, wire::MgmtStatus::kOk);
  ASSERT_EQ(Cli({"ports", "list"}), 0) << err_.str();
  const std::string listed = out_.str();
  const size_t at = listed.find("port ");
  ASSERT_NE(at, std::string::npos);
  const std::string first = listed.substr(at + 5, listed.find(' ', at + 5) - at - 5);
  ASSERT_EQ(Cli({"ports", "release", "--port", first}), 0) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("(1 group(s) dissolved)"));
  ASSERT_EQ(Cli({"groups", "list"}), 0) << err_.str();
  EXPECT_THAT(out_.str(), Not(HasSubstr("13")));
  EXPECT_EQ(Cli({"ports", "release", "--port", first}), 1);  // not bound any more
  EXPECT_THAT(err_.str(), HasSubstr("not bound"));
  EXPECT_EQ(Cli({"ports", "frob"}), 2);
  for (int i = 0; i < 2; ++i) close(fd[i]);

  ASSERT_EQ(Cli({"configure", "lease_ms=2500"}), 0) << err_.str();
  ASSERT_EQ(Cli({"configure"}), 0) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("lease_ms"));
  EXPECT_THAT(out_.str(), HasSubstr("2500"));
  EXPECT_NE(Cli({"configure", "lease_ms=5"}), 0);  // below 100 ms
  EXPECT_THAT(err_.str(), HasSubstr("lease_ms"));
}

}  // namespace
}  // namespace inca::cli
