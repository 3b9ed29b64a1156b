// cais-perf: nccl-tests-style benchmark of CAIS collectives through an
// inca switch or Gloo. Logic: src/perf.
//   cais-perf --op allreduce --ranks 8 -b 1K -e 64M -f 4 --backend switch
// One rank of a multi-host job (as torchrun sets it up):
//   RANK=0 WORLD_SIZE=4 MASTER_ADDR=198.18.0.10 MASTER_PORT=29500
//   INCA_SWITCH=198.18.0.1:9410 INCA_BIND_IP=198.18.0.10 cais-perf -b 1M -e 64M
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "client/settings.h"
#include "inca/util/size.h"
#include "perf/perf.h"
#include "util/cli_flags.h"

int main(int argc, char** argv) {
  inca::perf::PerfOptions o;
  std::string op = "allreduce", backend = "switch", begin = "1K", end = "64M", type = "f32",
              redop = "sum";
  CLI::App app{"cais-perf: CAIS collective benchmark and checker (nccl-tests style)"};
  app.add_option("--op", op, "allreduce | allgather | broadcast | reducescatter");
  app.add_option("--ranks,-n", o.ranks, "ranks to start on this host")->check(CLI::Range(1, 64));
  app.add_option("-b,--minbytes", begin, "smallest size (1K, 8M, ...)");
  app.add_option("-e,--maxbytes", end, "largest size");
  app.add_option("-f,--stepfactor", o.factor, "size multiplier between rows");
  app.add_option("--backend", backend, "switch | gloo");
  app.add_option("--switch", o.switch_address,
                 "use this inca-switchd (HOST:PORT) instead of starting one");
  app.add_option("--switchd", o.switchd_path, "inca-switchd binary to start");
  app.add_option("--switchd-arg", o.switchd_args, "extra flag for the started switch (repeatable)");
  app.add_option("--type,-d", type, "f32 | f16 | bf16 | i32");
  app.add_option("--redop,-o", redop, "sum | max | min | product");
  app.add_option("--root", o.root, "broadcast root");
  app.add_option("--iters,-i", o.iters, "timed iterations per size")->check(CLI::PositiveNumber);
  app.add_option("--warmup,-w", o.warmup, "warm-up iterations per size")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--warmup-ms", o.warmup_ms,
                 "also warm up each size for at least this long (the switch's offload controller "
                 "samples and explores each size class first)")
      ->check(CLI::Range(0, 600000));
  app.add_option("--duration-ms", o.duration_ms,
                 "time each size about this long (more iterations than --iters; jobs side by side)")
      ->check(CLI::Range(0, 600000));
  app.add_option("--straggler-ms", o.straggler_ms,
                 "the last rank starts each timed operation this much later than the others (a "
                 "straggler slowed on purpose: their contributions wait for it at the switch); "
                 "the retransmitted chunks in --json show whether they resent")
      ->check(CLI::Range(0, 10000));
  // The client's settings, one flag each, from their declaration
  // (src/client/settings.cc; docs/client-settings.md); a setting's variable
  // (INCA_IO, ...) stands in for its flag.
  inca::settings::FlagSet client_flags;
  client_flags.Add(app, inca::client::ClientSettings(), o.client);
  bool no_competitive = false;
  app.add_flag("--no-competitive", no_competitive, "--competitive false: delay control alone");
  bool settings_markdown = false, settings_json = false;
  app.add_flag("--settings-markdown", settings_markdown,
               "print docs/client-settings.md (the client settings' reference) and exit");
  app.add_flag("--settings-json", settings_json,
               "print the client settings as JSON (for the Python package) and exit");
  app.add_flag("!--no-check", o.check, "skip the result check");
  app.add_option("--timeout-s", o.timeout_s, "give up after this long")
      ->check(CLI::Range(1, 7 * 86400));
  app.add_flag("--json", o.json, "also print one JSON line with every row");
  int rank = -1, world = -1;
  auto* rank_opt = app.add_option("--rank", rank, "run as this rank of a multi-host job (env RANK)")
                       ->envname("RANK")
                       ->check(CLI::Range(0, 4095));
  app.add_option("--world-size", world, "ranks of that job (env WORLD_SIZE)")
      ->envname("WORLD_SIZE")
      ->check(CLI::Range(1, 4096));
  app.add_option("--master-addr", o.master_addr, "rank 0's address (env MASTER_ADDR)")
      ->envname("MASTER_ADDR");
  app.add_option("--master-port", o.master_port,
                 "rendezvous port; inca's store listens one above (env MASTER_PORT)")
      ->envname("MASTER_PORT")
      ->check(CLI::Range(1, 65534));
  app.add_option("--bind", o.bind_ip, "this rank's local address (env INCA_BIND_IP)")
      ->envname("INCA_BIND_IP");
  if (const int rc = inca::util::ParseCommandLine(app, argc, argv, "cais-perf"); rc >= 0) return rc;

  auto fail = [](const auto& status) {
    std::cerr << "cais-perf: " << status.message() << "\n";
    return 2;
  };
  if (settings_markdown || settings_json) {
    std::cout << (settings_markdown ? inca::client::ClientSettingsMarkdown()
                                    : inca::client::ClientSettingsJson());
    return 0;
  }
  if (auto s = client_flags.Apply(inca::client::ClientSettings(), &o.client); !s.ok()) {
    return fail(s);
  }
  if (no_competitive) o.client.competitive = false;
  if (auto s = inca::settings::ValidateAll(inca::client::ClientSettings(), o.client); !s.ok()) {
    return fail(s);
  }
  auto c = inca::perf::ParseCollective(op);
  if (!c.ok()) return fail(c.status());
  o.op = *c;
  auto b = inca::util::ParseSize(begin);
  if (!b.ok()) return fail(b.status());
  auto e = inca::util::ParseSize(end);
  if (!e.ok()) return fail(e.status());
  o.min_bytes = *b;
  o.max_bytes = *e;
  if (backend != "switch" && backend != "gloo") {
    std::cerr << "cais-perf: --backend must be switch or gloo\n";
    return 2;
  }
  o.use_switch = backend == "switch";
  if (*rank_opt) {
    if (world < 0) {
      std::cerr << "cais-perf: --rank (RANK) needs --world-size (WORLD_SIZE)\n";
      return 2;
    }
    o.rank = rank;
    o.ranks = world;
    if (const char* sw = std::getenv("INCA_SWITCH"); sw != nullptr && o.switch_address.empty()) {
      o.switch_address = sw;
    }
    if (o.switch_address == "none") {
      o.switch_address.clear();
      o.use_switch = false;
    }
  }
  const std::map<std::string, inca::wire::DType> types = {{"f32", inca::wire::DType::kF32},
                                                          {"f16", inca::wire::DType::kF16},
                                                          {"bf16", inca::wire::DType::kBF16},
                                                          {"i32", inca::wire::DType::kI32}};
  const std::map<std::string, inca::wire::ReduceOp> ops = {
      {"sum", inca::wire::ReduceOp::kSum},
      {"max", inca::wire::ReduceOp::kMax},
      {"min", inca::wire::ReduceOp::kMin},
      {"product", inca::wire::ReduceOp::kProduct}};
  if (!types.count(type) || !ops.count(redop)) {
    std::cerr << "cais-perf: --type must be f32|f16|bf16|i32 and --redop sum|max|min|product\n";
    return 2;
  }
  o.type = types.at(type);
  o.reduce = ops.at(redop);
  if (o.switchd_path.empty()) {
    std::error_code ec;
    const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    o.switchd_path = (self.parent_path() / "inca-switchd").string();
  }
  auto rows = inca::perf::RunPerf(o, std::cout);
  if (!rows.ok()) {
    fail(rows.status());  // a bad argument found there (--switch nohost) is a usage error too
    return rows.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  for (const auto& r : *rows) {
    if (r.wrong != 0) return 1;
  }
  return 0;
}
