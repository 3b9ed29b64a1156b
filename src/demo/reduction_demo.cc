#include "demo/reduction_demo.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iomanip>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace inca::demo {

namespace {

using cais::CaisReducer;
using dp::PortId;
using wire::CaisHeader;

// Delivers switch output back to the simulated ranks: results land in each
// rank's copy of the tensor; fallback notices are remembered.
struct RankSink final : dp::PacketSink {
  std::vector<std::vector<float>>* results = nullptr;
  std::vector<std::vector<uint8_t>>* have = nullptr;  // [rank][chunk] got result
  std::vector<std::vector<uint8_t>>* fallback = nullptr;
  size_t per_chunk = 0;
  void Emit(PortId port, std::span<const uint8_t> bytes) override {
    wire::CaisPacketView v;
    if (wire::ParseCais(bytes, &v) != wire::CaisParseError::kOk) return;
    const size_t rank = port;
    if (v.header.has_flag(wire::cais_flags::kFallback)) {
      (*fallback)[rank][v.header.chunk_id] = 1;
      return;
    }
    std::memcpy((*results)[rank].data() + v.header.chunk_id * per_chunk, v.payload.data(),
                v.payload.size());
    (*have)[rank][v.header.chunk_id] = 1;
  }
};

// The checks on the options alone: an error for the first one out of range.
absl::Status ValidateOptions(const ReductionDemoOptions& o) {
  if (o.ranks < 1 || o.ranks > cais::kMaxGroupMembers) {
    return absl::InvalidArgumentError(
        absl::StrCat("ranks ", o.ranks, " must be in 1..", cais::kMaxGroupMembers));
  }
  if (o.chunk_bytes == 0 || o.chunk_bytes % 4 != 0 ||
      o.chunk_bytes > o.switch_config.max_payload_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunk_bytes ", o.chunk_bytes, " must be a positive multiple of 4 and at most ",
        o.switch_config.max_payload_bytes, " (the switch's max payload)"));
  }
  if (o.tensor_bytes < 4 || o.tensor_bytes % 4 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor_bytes ", o.tensor_bytes, " must be a positive multiple of 4"));
  }
  if (!(o.loss >= 0 && o.loss < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("loss ", o.loss, " must be in [0, 1)"));
  }
  return absl::OkStatus();
}

// Each rank's random input, and the exact (double) sum of the inputs per element.
void FillInputs(std::mt19937_64* rng, std::vector<std::vector<float>>* input,
                std::vector<double>* reference) {
  std::uniform_real_distribution<float> val(-1.0f, 1.0f);
  for (size_t r = 0; r < input->size(); ++r) {
    for (size_t i = 0; i < reference->size(); ++i) {
      (*input)[r][i] = val(*rng);
      (*reference)[i] += (*input)[r][i];
    }
  }
}

// Host path for chunks the switch handed back (every rank got a fallback notice):
// sums them from the inputs into every rank's result; returns how many there were.
uint64_t FinishOnHost(const std::vector<std::vector<float>>& input,
                      const std::vector<std::vector<uint8_t>>& fallback, size_t per,
                      std::vector<std::vector<float>>* results) {
  const size_t n = input.size(), elems = input[0].size(), nchunks = fallback[0].size();
  uint64_t finished = 0;
  for (size_t c = 0; c < nchunks; ++c) {
    bool all_notified = true;
    for (size_t r = 0; r < n; ++r) all_notified = all_notified && fallback[r][c];
    if (!all_notified) continue;
    ++finished;
    const size_t off = c * per, cnt = std::min(per, elems - off);
    for (size_t r = 0; r < n; ++r) {
      for (size_t i = off; i < off + cnt; ++i) {
        float s = 0;
        for (size_t k = 0; k < n; ++k) s += input[k][i];
        (*results)[r][i] = s;
      }
    }
  }
  return finished;
}

// Check: f32 sums in any order stay within a small bound of the exact sum.
uint64_t CountWrongElements(const std::vector<std::vector<float>>& results,
                            const std::vector<double>& reference) {
  const size_t n = results.size(), elems = reference.size();
  uint64_t wrong = 0;
  for (size_t r = 0; r < n; ++r) {
    for (size_t i = 0; i < elems; ++i) {
      const double tol = 1e-5 * static_cast<double>(n);
      if (std::abs(static_cast<double>(results[r][i]) - reference[i]) > tol) ++wrong;
    }
  }
  return wrong;
}

}  // namespace

absl::StatusOr<ReductionDemoReport> RunReductionDemo(const ReductionDemoOptions& o) {
  if (absl::Status s = ValidateOptions(o); !s.ok()) return s;
  const size_t elems = o.tensor_bytes / 4, per = o.chunk_bytes / 4;
  const size_t nchunks = (elems + per - 1) / per;
  if (nchunks > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor needs ", nchunks, " chunks; at most 65535 per operation"));
  }
  cais::CaisConfig cfg = o.switch_config;
  cfg.deterministic = o.deterministic;
  auto created = CaisReducer::Create(cfg);
  if (!created.ok()) return created.status();
  CaisReducer& sw = **created;

  // The seed's rule: group 0, layer 5, all chunks, ranks 0..N-1 in and out.
  cais::PortMask ports;
  for (int r = 0; r < o.ranks; ++r) ports.add(static_cast<PortId>(r));
  if (auto s = sw.rules().Add({{0, 5, std::nullopt}, ports, ports, wire::CaisOp::kAllReduce});
      !s.ok()) {
    return s;
  }

  std::mt19937_64 rng(o.seed);
  const auto n = static_cast<size_t>(o.ranks);
  std::vector<std::vector<float>> input(n, std::vector<float>(elems));
  std::vector<double> reference(elems, 0.0);
  FillInputs(&rng, &input, &reference);
  std::vector<std::vector<float>> results(n, std::vector<float>(elems, 0.0f));
  std::vector<std::vector<uint8_t>> have(n, std::vector<uint8_t>(nchunks, 0));
  std::vector<std::vector<uint8_t>> fallback(n, std::vector<uint8_t>(nchunks, 0));
  RankSink sink;
  sink.results = &results;
  sink.have = &have;
  sink.fallback = &fallback;
  sink.per_chunk = per;

  ReductionDemoReport rep;
  rep.chunks = nchunks;
  const size_t stuck_chunk = o.timeout_demo ? nchunks / 2 : SIZE_MAX;
  std::vector<uint8_t> pkt(wire::kCaisHeaderBytes + o.chunk_bytes);
  auto send = [&](size_t rank, size_t chunk, bool retransmit, dp::TimeNs now) {
    const size_t off = chunk * per, cnt = std::min(per, elems - off);
    CaisHeader h;
    h.op = wire::CaisOp::kAllReduce;
    h.layer_id = 5;
    h.chunk_id = static_cast<uint16_t>(chunk);
    h.total_chunks = static_cast<uint16_t>(nchunks);
    h.seq_num = 1;
    h.payload_len = static_cast<uint32_t>(cnt * 4);
    h.flags = retransmit ? wire::cais_flags::kRetransmit : 0;
    wire::SerializeCaisHeader(h, pkt);
    std::memcpy(pkt.data() + wire::kCaisHeaderBytes, input[rank].data() + off, cnt * 4);
    ++rep.packets_sent;
    sw.Process(std::span<const uint8_t>(pkt.data(), wire::kCaisHeaderBytes + cnt * 4),
               static_cast<PortId>(rank), now, sink);
  };

  // Ranks send a window of chunks at a time, interleaved in random order,
  // as real ranks' packets would interleave at a switch port.
  const size_t window = std::max<size_t>(1, std::min<size_t>(cfg.max_pending_chunks / 2, 64));
  std::bernoulli_distribution lost(o.loss);
  std::vector<std::pair<size_t, size_t>> lost_list, order;
  dp::TimeNs now = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t base = 0; base < nchunks; base += window) {
    order.clear();
    for (size_t c = base; c < std::min(nchunks, base + window); ++c) {
      for (size_t r = 0; r < n; ++r) {
        if (c == stuck_chunk && r == n - 1) continue;  // this rank never sends it
        order.emplace_back(r, c);
      }
    }
    std::shuffle(order.begin(), order.end(), rng);
    for (auto [r, c] : order) {
      if (lost(rng)) {
        ++rep.lost;
        lost_list.emplace_back(r, c);
        continue;
      }
      send(r, c, false, now);
    }
    now += 1000;  // 1 us per window
    // Ranks that did not get the result for a chunk retransmit it.
    for (auto [r, c] : lost_list) {
      ++rep.retransmitted;
      send(r, c, true, now);
    }
    lost_list.clear();
    for (size_t c = base; c < std::min(nchunks, base + window); ++c) {
      if (c == stuck_chunk) continue;
      for (size_t r = 0; r < n; ++r) {
        if (!have[r][c]) {  // result lost? ask again
          ++rep.retransmitted;
          send(r, c, true, now);
        }
      }
    }
    const cais::SramUsage u = sw.sram();
    if (u.cells_pending + u.cells_retained >
        rep.sram_peak.cells_pending + rep.sram_peak.cells_retained) {
      rep.sram_peak = u;
    }
  }
  // Let the stuck chunk time out: every rank gets a fallback notice.
  now += cfg.timeout_ns;
  sw.Advance(now, sink);
  rep.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  rep.fallback_chunks = FinishOnHost(input, fallback, per, &results);
  rep.wrong_elements = CountWrongElements(results, reference);
  rep.totals = sw.totals();
  rep.program = sw.counters();
  rep.conserved = sw.counters().Conserved();
  return rep;
}

void PrintReport(const ReductionDemoOptions& o, const ReductionDemoReport& r, std::ostream& os) {
  const double mib = static_cast<double>(o.tensor_bytes) / (1 << 20);
  os << "inca CAIS reduction core demo\n"
     << "  ranks " << o.ranks << ", tensor " << mib << " MiB f32, chunk " << o.chunk_bytes << " B, "
     << r.chunks << " chunks, loss " << o.loss * 100 << "%, "
     << (o.deterministic ? "deterministic" : "arrival-order") << " mode\n"
     << "  packets sent " << r.packets_sent << " (lost " << r.lost << ", retransmitted "
     << r.retransmitted << ")\n"
     << "  switch: rx " << r.program.rx_packets << " = aggregated " << r.program.aggregated
     << " + forwarded " << r.program.forwarded << " + dropped " << r.program.dropped
     << (r.conserved ? "  [conserved]" : "  [NOT CONSERVED]") << "\n"
     << "          tx " << r.program.tx_packets << ", completed chunks "
     << r.totals.completed_chunks << ", results re-sent " << r.totals.results_resent
     << ", timeouts " << r.totals.timeouts << ", fallback notices " << r.totals.fallback_notices
     << "\n";
  for (size_t i = 1; i < dp::kDropReasonCount; ++i) {
    if (r.program.drops_by_reason[i] != 0) {
      os << "          dropped " << dp::ToString(static_cast<dp::DropReason>(i)) << ": "
         << r.program.drops_by_reason[i] << "\n";
    }
  }
  os << std::fixed << std::setprecision(1) << "  SRAM (" << r.sram_peak.sram_bytes / 1024
     << " KiB, " << r.sram_peak.cells_total << " cells of " << r.sram_peak.cell_bytes
     << " B) at its fullest: pending chunks " << 100.0 * r.sram_peak.pending_usage()
     << "% (admission limit " << 100.0 * r.sram_peak.usage_limit
     << "%), pending + retained results " << 100.0 * r.sram_peak.usage() << "%\n";
  os << std::setprecision(2) << "  reduced "
     << static_cast<double>(r.totals.reduced_bytes) / (1 << 20) << " MiB of contributions in "
     << r.elapsed_s * 1e3
     << " ms of demo wall time (includes generating the packets; core throughput: "
        "docs/PERFORMANCE.md)\n"
     << "  chunks finished on the host path: " << r.fallback_chunks << "\n"
     << "  result check: " << r.wrong_elements << " wrong elements"
     << (r.wrong_elements == 0 ? " -- OK" : " -- FAILED") << "\n";
}

}  // namespace inca::demo
