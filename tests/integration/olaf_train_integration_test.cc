// olaf-train run (issue 9): asynchronous DRL as real processes — a PS, 6
// workers in 3 clusters and inca-switchd running OLAF or FIFO, paced below
// the offered load — end to end on loopback, with the launcher's merged
// results checked.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "launch/process.h"
#include "util/flat_json.h"

namespace inca {
namespace {

namespace fs = std::filesystem;

std::string ReadAll(const fs::path& p) {
  return util::ReadText(p.string());
}

// The number after "key": in one of our flat JSON files; NaN when absent.
double Number(const std::string& json, const std::string& key) {
  return util::FlatJsonNumber(json, key).value_or(std::nan(""));
}

fs::path TempDir(const std::string& name) {
  const fs::path d =
      fs::temp_directory_path() / absl::StrCat("olaf-train-it-", getpid(), "-", name);
  fs::remove_all(d);
  return d;
}

int RunTool(std::vector<std::string> args, const std::vector<std::string>& extra = {}) {
  args.insert(args.end(), extra.begin(), extra.end());
  launch::Process p = launch::Process::Spawn(INCA_OLAF_TRAIN_PATH, args, true);
  EXPECT_TRUE(p.running());
  return p.Wait(std::chrono::seconds(120));
}

struct Summary {
  std::string json;
  fs::path dir;
};

Summary RunTraining(const std::string& program, const std::string& send_control,
                    const std::vector<std::string>& extra = {}) {
  const fs::path dir = TempDir(program + send_control + (extra.empty() ? "" : extra.back()));
  // 6 workers: 2 at a 5 ms cycle, 4 at 15 ms ~ 670 updates/s x 7.1 kB ~ 38 Mbit/s
  // offered against an 8 Mbit/s egress.
  const int rc = RunTool({"run",
                          "--program",
                          program,
                          "--send-control",
                          send_control,
                          "--duration",
                          "5",
                          "--clusters",
                          "3",
                          "--workers-per-cluster",
                          "2",
                          "--fast-clusters",
                          "1",
                          "--cycle-ms",
                          "5",
                          "--egress-mbps",
                          "8",
                          "--eval-episodes",
                          "2",
                          "--out",
                          dir.string(),
                          "--switchd",
                          INCA_SWITCHD_PATH},
                         extra);
  EXPECT_EQ(rc, 0) << program << ": see " << dir;
  return {ReadAll(dir / "summary.json"), dir};
}

TEST(OlafTrainIntegrationTest, FifoLosesUpdatesOlafMergesThem) {
  const Summary fifo = RunTraining("fifo", "off"), olaf = RunTraining("olaf", "off");
  for (const Summary* s : {&fifo, &olaf}) {
    SCOPED_TRACE(s->dir.string());
    EXPECT_EQ(Number(s->json, "failures"), 0);
    EXPECT_EQ(Number(s->json, "workers"), 6);
    EXPECT_GT(Number(s->json, "sent"), 1000);
    EXPECT_GT(Number(s->json, "ps_updates"), 200);
    EXPECT_GT(Number(s->json, "episodes"), 20);
    // Models come back through the switch's cluster multicast to every worker.
    for (int c = 0; c < 3; ++c) {
      for (int w = 0; w < 2; ++w) {
        const std::string wj = ReadAll(s->dir / absl::StrCat("worker-", c, "-", w, ".json"));
        EXPECT_GT(Number(wj, "models_adopted"), 0) << c << "." << w;
        EXPECT_EQ(Number(wj, "sent") + Number(wj, "suppressed"), Number(wj, "generated"));
        EXPECT_EQ(Number(wj, "send_errors"), 0);
      }
    }
    // Without returned models staleness would grow with the run (~ps_updates / 2).
    EXPECT_LT(Number(s->json, "mean_staleness"), Number(s->json, "ps_updates") / 10);
    const std::string ps = ReadAll(s->dir / "ps.json");
    EXPECT_EQ(Number(ps, "malformed"), 0);
    EXPECT_EQ(Number(ps, "fragments_rejected"), 0);
    EXPECT_NE(ReadAll(s->dir / "switchd.json").find("\"conserved\":true"), std::string::npos);
    // The curve has a row per episode.
    std::ifstream curve(s->dir / "curve.csv");
    int rows = -1;
    for (std::string line; std::getline(curve, line);) ++rows;
    EXPECT_EQ(rows, Number(s->json, "episodes"));
  }
  std::printf("loss FIFO %.3f OLAF %.3f; PS updates FIFO %.0f OLAF %.0f\n",
              Number(fifo.json, "loss"), Number(olaf.json, "loss"), Number(fifo.json, "ps_updates"),
              Number(olaf.json, "ps_updates"));
  // The paced egress is the bottleneck: FIFO tail-drops, OLAF merges.
  EXPECT_GT(Number(fifo.json, "loss"), 0.3);
  EXPECT_LT(Number(olaf.json, "loss"), 0.1);
  EXPECT_NEAR(Number(olaf.json, "ps_updates") / Number(fifo.json, "ps_updates"), 1.0, 0.3);
  fs::remove_all(fifo.dir);
  fs::remove_all(olaf.dir);
}

TEST(OlafTrainIntegrationTest, SendControlRuns) {
  const Summary s = RunTraining("olaf", "priority");
  EXPECT_EQ(Number(s.json, "failures"), 0);
  EXPECT_GT(Number(s.json, "ps_updates"), 100);
  double suppressed = 0;
  for (int c = 0; c < 3; ++c) {
    for (int w = 0; w < 2; ++w) {
      const std::string wj = ReadAll(s.dir / absl::StrCat("worker-", c, "-", w, ".json"));
      EXPECT_GT(Number(wj, "acks"), 0);
      suppressed += Number(wj, "suppressed");
    }
  }
  // P_send = Q_max / N_clusters < 1 with 3 clusters and a full queue.
  EXPECT_GT(suppressed, 0);
  fs::remove_all(s.dir);
}

TEST(OlafTrainIntegrationTest, BadFlagsExitTwo) {
  const std::string out = TempDir("bad").string();
  EXPECT_EQ(RunTool({"run", "--program", "lifo", "--out", out}), 2);
  EXPECT_EQ(RunTool({"run", "--duration", "0", "--out", out}), 2);
  EXPECT_EQ(RunTool({"run", "--clusters", "100", "--out", out}), 2);
  EXPECT_EQ(
      RunTool({"run", "--clusters", "2", "--workers-per-cluster", "2147483648", "--out", out}),
      2);  // would wrap to 0 in 32 bits
  EXPECT_EQ(RunTool({"run", "--egress-mbps", "inf", "--out", out}), 2);
  EXPECT_EQ(RunTool({"run", "--depth", "0", "--out", out}), 2);
  EXPECT_EQ(RunTool({"ps", "--bind", "not-an-address", "--out", out}), 2);
  EXPECT_EQ(RunTool({"ps", "--eval-episodes", "100000", "--out", out}), 2);
  EXPECT_EQ(RunTool({"run", "--switchd", "/nonexistent", "--out", out}), 2);
  EXPECT_EQ(RunTool({"worker", "--out", out}), 2);  // --peer is required
  EXPECT_EQ(RunTool({"worker", "--peer", "127.0.0.1:1", "--send-control", "maybe", "--out", out}),
            2);
  EXPECT_EQ(RunTool({"sim", "--set", "policy=lifo"}), 2);
  EXPECT_EQ(RunTool({"sim", "--set", "nonsense"}), 2);
  EXPECT_EQ(RunTool({"sim", "--set", "sample_s=1e-12"}), 2);
  EXPECT_EQ(RunTool({"sim", "--set", "name=../x"}), 2);
  EXPECT_EQ(RunTool({}), 2);
  fs::remove_all(out);
}

// Hosts whose clocks disagree (issue 20): a third of the workers run with
// CLOCK_MONOTONIC 5 s behind the PS's and switch's, a third 5 s ahead, in
// Linux time namespaces. Stamped on the PS's clock (learned from MODELs),
// nothing is stale and OLAF loses nothing; stamped on their own clocks, the
// switch takes the updates of the workers 5 s behind as 5 s old and drops
// them as stale.
TEST(OlafTrainIntegrationTest, WorkersWhoseClocksAreSecondsOffAreAgedOnThePsClock) {
  const Summary ps = RunTraining("olaf", "off", {"--clock-skew-s", "5", "--clock", "ps"});
  const Summary local = RunTraining("olaf", "off", {"--clock-skew-s", "5", "--clock", "local"});
  EXPECT_EQ(Number(ps.json, "failures"), 0) << ps.dir;
  EXPECT_EQ(Number(local.json, "failures"), 0) << local.dir;
  const std::string ps_sw = ReadAll(ps.dir / "switchd.json");
  const std::string local_sw = ReadAll(local.dir / "switchd.json");
  EXPECT_EQ(ps_sw.find("\"stale_on_arrival\":"), std::string::npos) << ps_sw;
  EXPECT_GT(Number(local_sw, "stale_on_arrival"), 100);
  EXPECT_LT(Number(ps.json, "loss"), 0.1);
  EXPECT_GT(Number(local.json, "loss"), 0.2);
  // Ages at the PS stay milliseconds: no cluster is seconds old.
  EXPECT_LT(Number(ps.json, "mean_aom_ms"), 200);
  fs::remove_all(ps.dir);
  fs::remove_all(local.dir);
}

}  // namespace
}  // namespace inca
