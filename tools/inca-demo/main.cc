// inca-demo: the quick-start job. Runs the CAIS reduction core on simulated
// ranks and prints what the switch did. All logic lives in src/demo.
#include <CLI/CLI.hpp>
#include <iostream>

#include "demo/reduction_demo.h"
#include "util/cli_flags.h"

int main(int argc, char** argv) {
  inca::demo::ReductionDemoOptions o;
  double tensor_mib = static_cast<double>(o.tensor_bytes) / (1 << 20);
  double timeout_ms = static_cast<double>(o.switch_config.timeout_ns) / 1e6;
  CLI::App app{"inca-demo: all-reduce a tensor through the CAIS in-switch reduction core"};
  app.add_option("--ranks", o.ranks, "number of ranks (switch ports)")->check(CLI::Range(1, 64));
  app.add_option("--tensor-mib", tensor_mib, "tensor size in MiB (f32)")
      ->check(CLI::Range(1e-6, 1024.0));
  app.add_option("--chunk-size", o.chunk_bytes, "payload bytes per packet (multiple of 4)");
  app.add_option("--loss", o.loss, "fraction of packets lost and retransmitted")
      ->check(CLI::Range(0.0, 0.99));
  app.add_option("--seed", o.seed, "random seed");
  app.add_flag("--deterministic", o.deterministic, "bitwise-reproducible reduction order");
  app.add_option("--timeout-ms", timeout_ms, "switch chunk timeout")->check(CLI::PositiveNumber);
  app.add_option("--max-pending-chunks", o.switch_config.max_pending_chunks, "switch slot limit")
      ->check(CLI::PositiveNumber);
  app.add_option("--sram-usage-limit", o.switch_config.sram_usage_limit, "admission limit (0,1]");
  app.add_option("--sram-bytes", o.switch_config.sram_bytes, "switch slot memory");
  app.add_flag("!--no-timeout-demo", o.timeout_demo, "do not leave a chunk to time out");
  if (const int rc = inca::util::ParseCommandLine(app, argc, argv, "inca-demo"); rc >= 0) return rc;
  o.tensor_bytes = static_cast<size_t>(tensor_mib * (1 << 20)) / 4 * 4;
  o.switch_config.timeout_ns = static_cast<inca::dp::TimeNs>(timeout_ms * 1e6);

  auto report = inca::demo::RunReductionDemo(o);
  if (!report.ok()) {
    std::cerr << "inca-demo: " << report.status().message() << "\n";
    return 2;
  }
  inca::demo::PrintReport(o, *report, std::cout);
  return (report->wrong_elements == 0 && report->conserved) ? 0 : 1;
}
