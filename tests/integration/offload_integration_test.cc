// End-to-end offload decisions (CAIS write-up 3.3/4.4): inca-switchd runs
// its embedded offload controller; SRAM pressure from another group turns
// offload off for the ranks' group (their operations are DECLINED and run on
// Gloo), and when the pressure goes the controller turns it back on. The
// collectives stay exact throughout, and /metrics shows the decisions.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "inca/client/communicator.h"
#include "inca/control/control_plane.h"
#include "inca/wire/cais.h"
#include "launch/process.h"
#include "monitor/httplib_include.h"

namespace inca {
namespace {

using launch::Process;
using wire::DType;
using wire::ReduceOp;

constexpr auto kRankTimeout = std::chrono::seconds(180);
// The switch's slot memory: 100 cells of 2 x 8,952 B (rounded to 17,920),
// of which 75% (75 cells) may be pending.
constexpr size_t kCellBytes = 17920;
constexpr size_t kSramBytes = 100 * kCellBytes;
// The hog's chunks: 66 of the 75 admissible cells, i.e. pressure 0.88 > 0.8.
constexpr int kHogChunks = 66;

struct Switch {
  Process proc;
  std::string data_addr, control_addr, http_addr;

  explicit Switch(std::vector<std::string> extra = {"--offload-measured", "false",
                                                    "--offload-host-latency-us", "1000000"}) {
    data_addr = absl::StrCat("127.0.0.1:", launch::FreeLoopbackPort(true));
    control_addr = absl::StrCat("127.0.0.1:", launch::FreeLoopbackPort(false));
    http_addr = absl::StrCat("127.0.0.1:", launch::FreeLoopbackPort(false));
    // By default the model alone with a host latency of 1 s: without
    // pressure every operation qualifies (the decision's arithmetic has its
    // unit tests); the hog's chunks time out after 4 s, which ends the
    // pressure. The measured mode has its own test below.
    std::vector<std::string> args = {"--listen",
                                     data_addr,
                                     "--log-level",
                                     "warn",
                                     "--control-listen",
                                     control_addr,
                                     "--http-listen",
                                     http_addr,
                                     "--offload-controller",
                                     "embedded",
                                     "--sram-bytes",
                                     std::to_string(kSramBytes),
                                     "--timeout-ms",
                                     "4000"};
    args.insert(args.end(), extra.begin(), extra.end());
    proc = Process::Spawn(INCA_SWITCHD_PATH, args, /*quiet_stdout=*/true);
  }
};

// One exact AllReduce of 16,384 floats (8 chunks); returns wrong elements.
uint64_t CheckedAllReduce(Communicator& c, int iteration) {
  const int n = c.world_size();
  std::vector<float> v(16384);
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = static_cast<float>((static_cast<int>(i % 13) - 6) * (c.rank() + 1) + iteration);
  }
  if (!c.AllReduce(v.data(), v.size(), DType::kF32, ReduceOp::kSum).ok()) return v.size();
  uint64_t wrong = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    float want = 0;
    for (int r = 0; r < n; ++r) {
      want += static_cast<float>((static_cast<int>(i % 13) - 6) * (r + 1) + iteration);
    }
    wrong += v[i] != want;
  }
  return wrong;
}

// Exit codes of a rank: 0 = saw switch -> declined -> switch, all exact.
int RankMain(const Switch& sw, int rank, int n, int store_port, int progress_fd) {
  CommunicatorOptions o;
  o.rank = rank;
  o.world_size = n;
  o.switch_address = sw.data_addr;
  o.store_address = absl::StrCat("127.0.0.1:", store_port);
  o.switch_port = rank;
  o.join_timeout_ms = 5000;
  o.switch_timeout_ms = 8000;  // longer than the hog's chunks live
  auto c = Communicator::Create(o);
  if (!c.ok()) return 10;
  uint64_t wrong = 0;
  bool told = false, declined_seen = false, resumed = false;
  uint64_t switch_at_decline = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  for (int it = 0;; ++it) {
    wrong += CheckedAllReduce(**c, it);
    const CommunicatorStats st = (*c)->stats();
    if (rank == 0 && !told && st.ops_switch >= 10) {
      const char b = 1;
      if (write(progress_fd, &b, 1) != 1) return 11;
      told = true;
    }
    if (!declined_seen && st.ops_declined > 0) {
      declined_seen = true;
      switch_at_decline = st.ops_switch;
    }
    if (declined_seen && st.ops_switch > switch_at_decline + 5) resumed = true;
    // Stop together: every rank learns whether any rank wants to go on.
    int32_t go_on = resumed || std::chrono::steady_clock::now() > deadline ? 0 : 1;
    if (!(*c)->AllReduce(&go_on, 1, DType::kI32, ReduceOp::kMax).ok()) return 12;
    if (go_on == 0) break;
  }
  const CommunicatorStats st = (*c)->stats();
  std::fprintf(stderr,
               "rank %d: %lu ops, %lu on the switch, %lu declined, %lu on hosts, %lu wrong\n", rank,
               static_cast<unsigned long>(st.ops), static_cast<unsigned long>(st.ops_switch),
               static_cast<unsigned long>(st.ops_declined), static_cast<unsigned long>(st.ops_host),
               static_cast<unsigned long>(wrong));
  if (wrong != 0) return 13;
  if (!declined_seen) return 14;
  if (!resumed) return 15;
  if (st.ops_host != st.ops_declined) return 16;  // no timeouts, no fallbacks: only declines
  return 0;
}

// Reads the switch's offload policy until a group in it satisfies `pred`
// (true) or 5 s pass (false). Each read is one control RPC, so the poll is
// paced by the round trip; the controller re-evaluates every 100 ms.
template <typename Pred>
bool PolicyShows(control::ControlClient& plane, Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    auto p = plane.GetOffloadPolicy();
    if (!p.ok()) return false;
    for (const auto& g : p->groups) {
      if (pred(g)) return true;
    }
  }
  return false;
}

// Fills the switch's memory from group 1: chunks of an operation whose
// second member never sends, so they stay pending until they time out.
void Hog(control::ControlClient& plane, const std::string& switch_addr) {
  uint16_t my_port = 0;
  const int fd = launch::BindLoopback(SOCK_DGRAM, &my_port);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(plane.RegisterPort(40, absl::StrCat("127.0.0.1:", my_port)).ok());
  ASSERT_TRUE(plane.RegisterPort(41, "127.0.0.1:9").ok());  // never sends
  ASSERT_TRUE(plane.CreateGroup(1, {40, 41}).ok());
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  to.sin_port =
      htons(static_cast<uint16_t>(std::stoi(switch_addr.substr(switch_addr.find(':') + 1))));
  std::vector<uint8_t> pkt(wire::kCaisHeaderBytes + 8952, 0);
  for (int c = 0; c < kHogChunks; ++c) {
    wire::CaisHeader h;
    h.group_id = 1;
    h.chunk_id = static_cast<uint16_t>(c);
    h.total_chunks = kHogChunks;
    h.payload_len = 8952;
    wire::SerializeCaisHeader(h, pkt);
    ASSERT_EQ(sendto(fd, pkt.data(), pkt.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof(to)),
              static_cast<ssize_t>(pkt.size()));
  }
  close(fd);
}

TEST(OffloadIntegrationTest, SramPressureTurnsOffloadOffAndRecoveryTurnsItBackOn) {
  // Without group shares: with them (the default) one group cannot fill
  // the memory alone, which is the point of shares but not of this test.
  Switch sw({"--offload-measured", "false", "--offload-host-latency-us", "1000000", "--group-share",
             "0"});
  ASSERT_TRUE(sw.proc.running());
  ASSERT_TRUE(launch::WaitForSwitch(sw.data_addr, std::chrono::seconds(10)));
  const int store_port = launch::FreeLoopbackPort(false);
  int progress[2];
  ASSERT_EQ(pipe(progress), 0);
  std::vector<Process> ranks;
  for (int r = 0; r < 2; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      close(progress[0]);
      _exit(RankMain(sw, r, 2, store_port, progress[1]));
    }
    ranks.emplace_back(pid);
  }
  close(progress[1]);
  // Threads (gRPC) only after the forks.
  auto plane = control::ConnectControl(sw.control_addr, "");
  ASSERT_TRUE(plane.ok()) << plane.status();
  char b = 0;
  ASSERT_EQ(read(progress[0], &b, 1), 1);  // the ranks are on the switch
  Hog(**plane, sw.data_addr);

  // While the hog holds memory the controller declines every operation.
  const bool off_seen = PolicyShows(**plane, [](const control::GroupOffload& g) {
    return g.group_id == 0 && g.min_bytes > g.max_bytes;
  });
  EXPECT_TRUE(off_seen) << "the controller never turned offload off for group 0";

  for (size_t r = 0; r < ranks.size(); ++r) EXPECT_EQ(ranks[r].Wait(kRankTimeout), 0) << r;
  close(progress[0]);

  auto p = (*plane)->GetOffloadPolicy();
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->controller, "embedded");
  auto st = (*plane)->GetStats();
  ASSERT_TRUE(st.ok());
  uint64_t declined = 0, accepted = 0;
  for (const auto& g : st->groups) {
    if (g.group_id == 0) {
      declined = g.counters.offload_declined_ops;
      accepted = g.counters.offload_accepted_ops;
    }
  }
  EXPECT_GT(declined, 0u);
  EXPECT_GT(accepted, 0u);
  EXPECT_GT(st->counters.ingress_delay_samples, 0u);  // the controller had its queue delay

  // The same decisions through /metrics.
  httplib::Client http(absl::StrCat("http://", sw.http_addr));
  auto res = http.Get("/metrics");
  ASSERT_TRUE(res) << "GET /metrics failed";
  EXPECT_EQ(res->status, 200);
  EXPECT_NE(res->body.find(absl::StrCat(
                "inca_cais_group_offload_declined_operations_total{group=\"0\"} ", declined)),
            std::string::npos);
  EXPECT_NE(res->body.find("inca_cais_group_offload_min_bytes{group=\"0\"}"), std::string::npos);
}

// Measured mode: rank 0 reports every operation's time; after the first
// operation of a size class ran on the path the model picked, the
// controller explores the other path once, and from then on the class is
// decided from what both paths measured. The ranks run 1 MiB operations
// until the parent, which watches the switch, writes to `stop_fd` (read by
// rank 0, agreed on by both): reports are rate-limited per size class, so
// a rank's own count of declines says nothing about how many samples the
// switch has. Exits 0 if all results were exact and both paths were used.
int MeasuredRankMain(const Switch& sw, int rank, int store_port, int stop_fd, int done_fd,
                     int go_fd) {
  CommunicatorOptions o;
  o.rank = rank;
  o.world_size = 2;
  o.switch_address = sw.data_addr;
  o.store_address = absl::StrCat("127.0.0.1:", store_port);
  o.join_timeout_ms = 5000;
  auto c = Communicator::Create(o);
  if (!c.ok()) return 10;
  uint64_t wrong = 0, mib_declined = 0, mib_switch = 0;
  // Bounded by 30 s and 20,000 operations (the host path is explored again
  // after 1 s, so two samples of it take a few seconds).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (int it = 0; it < 20000; ++it) {
    const CommunicatorStats before = (*c)->stats();
    std::vector<float> v(262144);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i % 7) * (rank + 1) + it);
    if (!(*c)->AllReduce(v.data(), v.size(), DType::kF32, ReduceOp::kSum).ok()) return 11;
    for (size_t i = 0; i < v.size(); ++i) {
      wrong += v[i] != static_cast<float>((i % 7) * 3 + 2 * it);
    }
    const CommunicatorStats st = (*c)->stats();
    mib_declined += st.ops_declined - before.ops_declined;
    mib_switch += st.ops_switch - before.ops_switch;
    pollfd p{stop_fd, POLLIN, 0};
    const bool told = rank == 0 && poll(&p, 1, 0) == 1;
    int32_t stop = told || std::chrono::steady_clock::now() > deadline ? 1 : 0;
    if (!(*c)->AllReduce(&stop, 1, DType::kI32, ReduceOp::kMax).ok()) return 12;
    if (stop == 1) break;
  }
  const CommunicatorStats st = (*c)->stats();
  std::fprintf(stderr, "rank %d: %lu ops, %lu on the switch, %lu declined, %lu wrong\n", rank,
               static_cast<unsigned long>(st.ops), static_cast<unsigned long>(st.ops_switch),
               static_cast<unsigned long>(st.ops_declined), static_cast<unsigned long>(wrong));
  if (wrong != 0) return 13;
  if (mib_declined < 2 || mib_switch < 2) return 14;
  if (st.ops_host != st.ops_declined) return 15;  // only declines, no fallbacks
  // Stay joined until the parent has looked at the switch.
  const char b = 1;
  if (write(done_fd, &b, 1) != 1) return 16;
  char go = 0;
  if (read(go_fd, &go, 1) != 1) return 17;
  return 0;
}

// The switch's timings for group 0's 1 MiB class (bin 20), if it has any.
std::optional<control::OffloadTiming> MibTiming(control::ControlClient& plane) {
  auto groups = plane.ListGroups();
  if (!groups.ok()) return std::nullopt;
  for (const auto& g : *groups) {
    if (g.group_id != 0) continue;
    for (const auto& t : g.timings) {
      if (t.bin == 20) return t;
    }
  }
  return std::nullopt;
}

TEST(OffloadIntegrationTest, MeasuredModeExploresBothPathsAndDecidesFromReports) {
  Switch sw(std::vector<std::string>{});  // the defaults: measured decisions
  ASSERT_TRUE(sw.proc.running());
  ASSERT_TRUE(launch::WaitForSwitch(sw.data_addr, std::chrono::seconds(10)));
  const int store_port = launch::FreeLoopbackPort(false);
  int stop[2], done[2], go[2];
  ASSERT_EQ(pipe(stop), 0);
  ASSERT_EQ(pipe(done), 0);
  ASSERT_EQ(pipe(go), 0);
  std::vector<Process> ranks;
  for (int r = 0; r < 2; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      close(stop[1]);
      close(done[0]);
      close(go[1]);
      _exit(MeasuredRankMain(sw, r, store_port, stop[0], done[1], go[0]));
    }
    ranks.emplace_back(pid);
  }
  close(stop[0]);
  close(done[1]);
  close(go[0]);
  auto plane = control::ConnectControl(sw.control_addr, "");
  ASSERT_TRUE(plane.ok()) << plane.status();
  // Until the switch holds two samples of each path for 1 MiB (bounded by
  // the ranks' own 30 s).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(35);
  std::optional<control::OffloadTiming> mib;
  while (std::chrono::steady_clock::now() < deadline) {
    mib = MibTiming(**plane);
    if (mib && mib->switch_path.samples >= 2 && mib->host_path.samples >= 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling interval
  }
  const char s = 1;
  ASSERT_EQ(write(stop[1], &s, 1), 1);
  char b = 0;
  for (int r = 0; r < 2; ++r) ASSERT_EQ(read(done[0], &b, 1), 1) << "rank failed early";
  mib = MibTiming(**plane);
  ASSERT_TRUE(mib.has_value()) << "no reports for 1 MiB operations";
  EXPECT_GE(mib->switch_path.samples, 2u);
  EXPECT_GE(mib->host_path.samples, 2u);
  EXPECT_GT(mib->switch_path.mean_us, 0);
  EXPECT_GT(mib->host_path.mean_us, 0);
  // The controller's next evaluations decide 1 MiB from the measurements.
  const bool measured = PolicyShows(**plane, [](const control::GroupOffload& g) {
    return g.group_id == 0 && (g.measured_bins >> 20 & 1) != 0;
  });
  EXPECT_TRUE(measured) << "1 MiB never decided from measurements";
  httplib::Client http(absl::StrCat("http://", sw.http_addr));
  auto res = http.Get("/metrics");
  ASSERT_TRUE(res) << "GET /metrics failed";
  EXPECT_NE(res->body.find("inca_cais_group_offload_explored_operations_total{group=\"0\"} "),
            std::string::npos);
  EXPECT_EQ(res->body.find("inca_switch_mgmt_reports_total 0\n"), std::string::npos);
  const char gob[2] = {1, 1};
  ASSERT_EQ(write(go[1], gob, 2), 2);
  for (size_t r = 0; r < ranks.size(); ++r) EXPECT_EQ(ranks[r].Wait(kRankTimeout), 0) << r;
  close(stop[1]);
  close(done[0]);
  close(go[1]);
}

TEST(IncaControllerTest, OneControllerManagesSeveralSwitchesAndSurvivesAnUnreachableOne) {
  std::vector<Process> switches;
  std::vector<std::string> controls;
  for (int i = 0; i < 2; ++i) {
    const std::string data = absl::StrCat("127.0.0.1:", launch::FreeLoopbackPort(true));
    controls.push_back(absl::StrCat("127.0.0.1:", launch::FreeLoopbackPort(false)));
    switches.push_back(Process::Spawn(
        INCA_SWITCHD_PATH,
        {"--listen", data, "--log-level", "warn", "--control-listen", controls.back(),
         "--http-listen", "off", "--offload-controller", "external"},
        /*quiet_stdout=*/true));
    ASSERT_TRUE(launch::WaitForSwitch(data, std::chrono::seconds(10)));
  }
  const std::string nobody = absl::StrCat("127.0.0.1:", launch::FreeLoopbackPort(false));
  // Bad invocations exit 2 before touching any switch.
  EXPECT_EQ(Process::Spawn(INCA_CONTROLLER_PATH, {"--duration-s", "1"}, true)
                .Wait(std::chrono::seconds(30)),
            2);
  EXPECT_EQ(Process::Spawn(INCA_CONTROLLER_PATH, {"--switch", "nohostport"}, true)
                .Wait(std::chrono::seconds(30)),
            2);
  // Every switch unreachable: exit 3; every switch refusing it (a token it
  // does not have): exit 1 (issue 18: both exited 0).
  EXPECT_EQ(Process::Spawn(INCA_CONTROLLER_PATH,
                           {"--switch", nobody, "--duration-s", "0.5", "--log-level", "off"}, true)
                .Wait(std::chrono::seconds(30)),
            3);
  const std::string guarded = absl::StrCat("127.0.0.1:", launch::FreeLoopbackPort(false));
  const std::string guarded_data = absl::StrCat("127.0.0.1:", launch::FreeLoopbackPort(true));
  switches.push_back(Process::Spawn(
      INCA_SWITCHD_PATH,
      {"--listen", guarded_data, "--log-level", "warn", "--control-listen", guarded,
       "--control-token", "s3cret", "--http-listen", "off", "--offload-controller", "external"},
      /*quiet_stdout=*/true));
  ASSERT_TRUE(launch::WaitForSwitch(guarded_data, std::chrono::seconds(10)));
  EXPECT_EQ(Process::Spawn(INCA_CONTROLLER_PATH,
                           {"--switch", guarded, "--duration-s", "0.5", "--log-level", "off"}, true)
                .Wait(std::chrono::seconds(30)),
            1);
  Process ctl =
      Process::Spawn(INCA_CONTROLLER_PATH,
                     {"--switch", controls[0], "--switch", nobody, "--switch", controls[1],
                      "--name", "test-ctl", "--duration-s", "3", "--log-level", "error"},
                     /*quiet_stdout=*/true);
  // Threads (gRPC) only after the forks above.
  std::vector<std::unique_ptr<control::ControlClient>> planes;
  for (const auto& c : controls) {
    auto p = control::ConnectControl(c, "");
    ASSERT_TRUE(p.ok()) << p.status();
    ASSERT_TRUE((*p)->CreateGroup(3, {1, 2, 5}).ok());
    planes.push_back(std::move(*p));
  }
  EXPECT_EQ(ctl.Wait(std::chrono::seconds(60)), 0);
  for (size_t i = 0; i < planes.size(); ++i) {
    auto p = planes[i]->GetOffloadPolicy();
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->controller, "test-ctl") << i;
    EXPECT_GT(p->updated_unix_ms, 0) << i;
    ASSERT_EQ(p->groups.size(), 1u) << i;
    EXPECT_EQ(p->groups[0].group_id, 3);
    EXPECT_EQ(p->groups[0].participants, 3);
    EXPECT_LE(p->groups[0].min_bytes, p->groups[0].max_bytes);  // idle switch: offload on
  }
}

// Runs inca-switchd with `args` to completion; returns its exit code and
// everything it wrote to stderr (stdout goes to /dev/null).
std::pair<int, std::string> RunSwitchd(const std::vector<std::string>& args) {
  std::string cmd = absl::StrCat("'", INCA_SWITCHD_PATH, "'");
  for (const auto& a : args) absl::StrAppend(&cmd, " '", a, "'");
  absl::StrAppend(&cmd, " 2>&1 >/dev/null");
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return {-1, "popen failed"};
  std::string text;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), p)) > 0;) text.append(buf, n);
  const int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), text};
}

// Issue 18: bad flags and files crashed (bad_alloc, exit 134), were
// swallowed (a directory as --config ran on defaults), wrapped (-5), or
// printed gRPC's multi-line internal log first. Each is one line, exit 2,
// before anything is served.
TEST(SwitchdBadInputTest, EachIsOneLineAndExitTwo) {
  // A TCP listener the control API's port collides with.
  uint16_t held_port = 0;
  const int held = launch::BindLoopback(SOCK_STREAM, &held_port);
  ASSERT_GE(held, 0);
  ASSERT_EQ(listen(held, 1), 0);
  const std::string taken = absl::StrCat("127.0.0.1:", held_port);
  const std::string dir = ::testing::TempDir();
  const struct {
    std::vector<std::string> args;
    const char* says;
  } cases[] = {
      {{"--sram-bytes", "100000000000"}, "sram_bytes 100000000000"},
      {{"--sram-bytes", "-5"}, "must not be negative"},
      {{"--socket-buffer-bytes", "-1"}, "must not be negative"},
      {{"--config", dir}, "is a directory"},
      {{"--control-listen", taken}, "--control-listen"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = {"--listen", "127.0.0.1:0", "--http-listen",
                                     "off",      "--log-level", "error"};
    if (c.args[0] != "--control-listen") args.insert(args.end(), {"--control-listen", "off"});
    args.insert(args.end(), c.args.begin(), c.args.end());
    const auto [code, text] = RunSwitchd(args);
    EXPECT_EQ(code, 2) << c.args[0] << ": " << text;
    EXPECT_NE(text.find(c.says), std::string::npos) << text;
    EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  }
  close(held);
}

}  // namespace
}  // namespace inca
