#include "perf/perf.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <iomanip>
#include <map>
#include <ostream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/settings.h"
#include "client/switch_transport.h"
#include "inca/cais/port_mask.h"
#include "inca/client/communicator.h"
#include "inca/util/half.h"
#include "launch/process.h"
#include "reduce/kernels.h"

namespace inca::perf {

namespace {

using wire::DType;
using wire::ReduceOp;

// Exact-valued inputs: every partial sum/product/min/max is representable
// in every type (even bf16), so results must match the reference bit for
// bit whatever the reduction order.
double InputValue(ReduceOp op, int rank, uint64_t i) {
  switch (op) {
    case ReduceOp::kSum: return static_cast<double>(static_cast<int64_t>(i % 7) - 3) * (rank + 1);
    case ReduceOp::kProduct: {
      const double mag = (i + static_cast<uint64_t>(rank)) % 3 == 0 ? 2.0 : 1.0;
      return (i + static_cast<uint64_t>(rank)) % 5 == 0 ? -mag : mag;
    }
    default:
      return static_cast<double>(
          static_cast<int64_t>((i * 31 + static_cast<uint64_t>(rank) * 17) % 101) - 50);
  }
}

void Store(DType t, uint8_t* p, double v) {
  switch (t) {
    case DType::kF32: {
      const auto f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      break;
    }
    case DType::kI32: {
      const auto x = static_cast<int32_t>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case DType::kF16: {
      const uint16_t h = F32ToF16(static_cast<float>(v));
      std::memcpy(p, &h, 2);
      break;
    }
    case DType::kBF16: {
      const uint16_t h = F32ToBF16(static_cast<float>(v));
      std::memcpy(p, &h, 2);
      break;
    }
  }
}

double Reduce(ReduceOp op, double a, double b) {
  return reduce::Fold(op, a, b);
}

struct Record {
  uint32_t index;
  uint32_t host_ops;  // operations of this size that used the host path
  uint32_t reasons;   // why (bit r: HostReason r)
  uint64_t wrong;
  double mean_us;
  uint64_t sent;           // chunks sent for this size (first transmissions)
  uint64_t retransmitted;  // chunks sent again
  // Times this rank's switch path entered competitive mode so far (the
  // transport core's PathState), cumulative over the sizes.
  uint64_t competitive_entries;
};

// Steady-clock (CLOCK_MONOTONIC) nanoseconds: comparable across processes
// and network namespaces of one machine.
int64_t SteadyNs(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// One size's buffers and collective on one rank.
struct SizeRun {
  const PerfOptions& o;
  Communicator& comm;
  int rank;
  size_t esize;
  uint64_t count;      // input elements
  uint64_t out_count;  // output elements
  std::vector<uint8_t> in, out;
};

// What the timed iterations and the check of one size saw on one rank.
struct Timing {
  uint64_t host_ops = 0;  // host-path operations among the timed ones and the check
  uint32_t reasons = 0;   // why they did (bit r: HostReason r)
  std::vector<int64_t> timeline;
  double mean_us = 0;
  uint64_t wrong = 0;  // wrong output elements (--check)
};

// This rank's communicator options: `base` plus the perf options.
CommunicatorOptions RankOptions(const PerfOptions& o, int rank, const CommunicatorOptions& base) {
  CommunicatorOptions co = base;
  for (const auto& s : client::ClientSettings()) s.set(&co, s.get(o.client));
  co.rank = rank;
  co.world_size = o.ranks;
  co.switch_port = rank;
  return co;
}

// Prints `s`'s error for this rank if it failed; whether it succeeded.
bool Ok(int rank, const absl::Status& s) {
  if (s.ok()) return true;
  std::fprintf(stderr, "cais-perf rank %d: %s\n", rank, std::string(s.message()).c_str());
  return false;
}

// Fills the input with this rank's exact-valued inputs.
void Fill(SizeRun* r) {
  for (uint64_t i = 0; i < r->count; ++i)
    Store(r->o.type, &r->in[i * r->esize], InputValue(r->o.reduce, r->rank, i));
}

// Runs the collective once.
absl::Status RunOnce(SizeRun* r) {
  const PerfOptions& o = r->o;
  switch (o.op) {
    case Collective::kAllReduce: return r->comm.AllReduce(r->in.data(), r->count, o.type, o.reduce);
    case Collective::kAllGather:
      return r->comm.AllGather(r->in.data(), r->out.data(), r->count, o.type);
    case Collective::kBroadcast: return r->comm.Broadcast(r->in.data(), r->count, o.type, o.root);
    case Collective::kReduceScatter:
      return r->comm.ReduceScatter(r->in.data(), r->out.data(), r->out_count, o.type, o.reduce);
  }
  return absl::OkStatus();
}

// Rank 0's clock decides whether another iteration is due (`ms` after
// `since`); the ranks agree on it (one 4-byte broadcast). False: failed.
bool AgreeMore(SizeRun* r, std::chrono::steady_clock::time_point since, int ms, bool* go) {
  int32_t v = std::chrono::steady_clock::now() - since < std::chrono::milliseconds(ms) ? 1 : 0;
  if (!Ok(r->rank, r->comm.Broadcast(&v, 1, wire::DType::kI32, 0))) return false;
  *go = v != 0;
  return true;
}

// The warm-up: --warmup operations, then more until --warmup-ms has
// passed on rank 0 (at most 1000). 0 or the exit code.
int WarmUp(SizeRun* r) {
  const auto warm_start = std::chrono::steady_clock::now();
  for (int w = 0; w < r->o.warmup; ++w) {
    if (!Ok(r->rank, RunOnce(r))) return 5;
  }
  for (int extra = 0; r->o.warmup_ms > 0 && extra < 1000; ++extra) {
    bool go = false;
    if (!AgreeMore(r, warm_start, r->o.warmup_ms, &go)) return 5;
    if (!go) break;
    if (!Ok(r->rank, RunOnce(r))) return 5;
  }
  return 0;
}

// --duration-ms: one more warm-up operation, timed on rank 0, sets how
// many timed iterations fill the duration; the ranks agree on the count
// once (no agreement inside the timed loop). 0 or the exit code.
int AgreeTimedIters(SizeRun* r, int32_t* timed_iters) {
  const PerfOptions& o = r->o;
  const auto c0 = std::chrono::steady_clock::now();
  if (!Ok(r->rank, RunOnce(r))) return 5;
  const double op_ms = std::max(
      1e-3,
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - c0).count());
  *timed_iters = static_cast<int32_t>(
      std::clamp<double>(std::ceil(o.duration_ms / op_ms), o.iters, o.iters + 10000.0));
  if (!Ok(r->rank, r->comm.Broadcast(timed_iters, 1, wire::DType::kI32, 0))) return 5;
  return 0;
}

// Runs the collective once, counting a host-path operation into `t`;
// whether it succeeded.
bool CountedRun(SizeRun* r, Timing* t) {
  const CommunicatorStats then = r->comm.stats();
  if (!Ok(r->rank, RunOnce(r))) return false;
  const CommunicatorStats now = r->comm.stats();
  t->host_ops += now.ops_host - then.ops_host;
  for (size_t i = 0; i < kHostReasons; ++i) {
    if (now.host_reasons[i] != then.host_reasons[i]) t->reasons |= 1u << i;
  }
  return true;
}

// The timed iterations: their timeline (the start, then each one's end)
// and mean time. 0 or the exit code.
int TimeIters(SizeRun* r, int32_t timed_iters, Timing* t) {
  const auto t0 = std::chrono::steady_clock::now();
  t->timeline = {SteadyNs(t0)};
  const bool straggler = r->o.straggler_ms > 0 && r->rank == r->comm.world_size() - 1;
  for (int timed = 0; timed < timed_iters; ++timed) {
    if (straggler) std::this_thread::sleep_for(std::chrono::milliseconds(r->o.straggler_ms));
    if (!CountedRun(r, t)) return 5;
    t->timeline.push_back(SteadyNs(std::chrono::steady_clock::now()));
  }
  t->mean_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
      std::max(1, timed_iters);
  return 0;
}

// The output this rank must get, element by element.
std::vector<uint8_t> Expected(const SizeRun& r) {
  const PerfOptions& o = r.o;
  std::vector<uint8_t> expect(r.out_count * r.esize);
  for (uint64_t i = 0; i < r.out_count; ++i) {
    double v;
    if (o.op == Collective::kAllReduce) {
      v = InputValue(o.reduce, 0, i);
      for (int k = 1; k < o.ranks; ++k) v = Reduce(o.reduce, v, InputValue(o.reduce, k, i));
    } else if (o.op == Collective::kAllGather) {
      v = InputValue(o.reduce, static_cast<int>(i / r.count), i % r.count);
    } else if (o.op == Collective::kReduceScatter) {
      const uint64_t g = static_cast<uint64_t>(r.rank) * r.out_count + i;
      v = InputValue(o.reduce, 0, g);
      for (int k = 1; k < o.ranks; ++k) v = Reduce(o.reduce, v, InputValue(o.reduce, k, g));
    } else {
      v = InputValue(o.reduce, o.root, i);
    }
    Store(o.type, &expect[i * r.esize], v);
  }
  return expect;
}

// The check: one more operation on fresh input, its wrong output elements
// counted into `t`. 0 or the exit code.
int Check(SizeRun* r, Timing* t) {
  Fill(r);
  if (!CountedRun(r, t)) return 5;
  const std::vector<uint8_t> expect = Expected(*r);
  const std::vector<uint8_t>& got =
      r->o.op == Collective::kAllGather || r->o.op == Collective::kReduceScatter ? r->out : r->in;
  for (uint64_t i = 0; i < r->out_count; ++i) {
    if (std::memcmp(&got[i * r->esize], &expect[i * r->esize], r->esize) != 0) ++t->wrong;
  }
  return 0;
}

// One rank's run over every size. `emit` gets each size's record and its
// timeline (the timed loop's start, then each timed iteration's end; false:
// stop). Returns the exit code.
using Emit = std::function<bool(Communicator&, const Record&, const std::vector<int64_t>&)>;
int RankBody(const PerfOptions& o, const std::vector<uint64_t>& sizes, int rank,
             const CommunicatorOptions& base, const Emit& emit) {
  auto comm = Communicator::Create(RankOptions(o, rank, base));
  if (!comm.ok()) {
    std::fprintf(stderr, "cais-perf rank %d: %s\n", rank,
                 std::string(comm.status().message()).c_str());
    return 4;
  }
  const size_t esize = wire::ElementBytes(o.type);
  const auto n = static_cast<uint64_t>(o.ranks);
  for (uint32_t k = 0; k < sizes.size(); ++k) {
    const uint64_t bytes = sizes[k];
    // As nccl-tests: AllGather's size is the gathered (output) size,
    // ReduceScatter's the scattered (input) size.
    const uint64_t count = o.op == Collective::kAllGather ? bytes / esize / n : bytes / esize;
    const uint64_t out_count = o.op == Collective::kAllGather       ? count * n
                               : o.op == Collective::kReduceScatter ? count / n
                                                                    : count;
    SizeRun r{o,
              **comm,
              rank,
              esize,
              count,
              out_count,
              std::vector<uint8_t>(count * esize),
              std::vector<uint8_t>(out_count * esize)};
    Fill(&r);
    if (const int rc = WarmUp(&r); rc != 0) return rc;
    int32_t timed_iters = o.iters;
    if (o.duration_ms > 0) {
      if (const int rc = AgreeTimedIters(&r, &timed_iters); rc != 0) return rc;
    }
    // The path column and the chunk counts cover the timed iterations and
    // the check, not the warm-up (where the offload controller explores).
    const CommunicatorStats before = (*comm)->stats();
    Timing t;
    if (const int rc = TimeIters(&r, timed_iters, &t); rc != 0) return rc;
    if (o.check) {
      if (const int rc = Check(&r, &t); rc != 0) return rc;
    }
    const CommunicatorStats after = (*comm)->stats();
    const Record rec{k,
                     static_cast<uint32_t>(t.host_ops),
                     t.reasons,
                     t.wrong,
                     t.mean_us,
                     after.chunks_sent - before.chunks_sent,
                     after.chunks_retransmitted - before.chunks_retransmitted,
                     after.competitive_entries};
    if (!emit(**comm, rec, t.timeline)) return 6;
  }
  return 0;
}

int RankMain(const PerfOptions& o, const std::vector<uint64_t>& sizes, int rank,
             const std::string& switch_addr, int store_port, int fd) {
  CommunicatorOptions co;
  co.switch_address = switch_addr;
  co.store_address = absl::StrCat("127.0.0.1:", store_port);
  return RankBody(o, sizes, rank, co, [fd](Communicator&, const Record& rec, const auto&) {
    return write(fd, &rec, sizeof(rec)) == sizeof(rec);
  });
}

double BusFactor(const PerfOptions& o) {
  const double n = o.ranks;
  const bool blocked = o.op == Collective::kAllGather || o.op == Collective::kReduceScatter;
  return o.op == Collective::kAllReduce ? 2 * (n - 1) / n : blocked ? (n - 1) / n : 1.0;
}

// The row of one size from the slowest rank's time, the wrong elements of
// all ranks and the most host-path operations any rank saw.
PerfRow MakeRow(const PerfOptions& o, uint64_t bytes, double time_us, uint64_t wrong,
                uint32_t host_ops, uint32_t reasons) {
  PerfRow row;
  row.bytes = bytes;
  row.count = bytes / wire::ElementBytes(o.type);
  row.time_us = time_us;
  row.wrong = wrong;
  row.algbw_gbps = static_cast<double>(row.bytes) / (row.time_us * 1e3);
  row.busbw_gbps = row.algbw_gbps * BusFactor(o);
  row.path = !o.use_switch ? "host" : host_ops == 0 ? "switch" : "host/mixed";
  // Why, when the switch path was wanted: "host/mixed (explore,measured)".
  std::vector<std::string> why;
  for (size_t i = 0; i < kHostReasons; ++i) {
    if ((reasons >> i & 1) != 0) why.emplace_back(kHostReasonNames[i]);
  }
  if (o.use_switch && host_ops != 0) row.why = absl::StrJoin(why, ",");
  row.host_ops = o.use_switch ? host_ops : 0;
  return row;
}

void PrintHeader(const PerfOptions& o, const std::string& backend, std::ostream& out) {
  const char* op_name = o.op == Collective::kAllReduce       ? "allreduce"
                        : o.op == Collective::kAllGather     ? "allgather"
                        : o.op == Collective::kReduceScatter ? "reducescatter"
                                                             : "broadcast";
  out << "# cais-perf: " << op_name << ", " << o.ranks << " ranks, backend " << backend << ", "
      << wire::ToString(o.type) << " " << wire::ToString(o.reduce) << ", chunk "
      << o.client.chunk_size << " B, window " << o.client.max_pending_chunks << ", iters "
      << o.iters
      << (o.use_switch               ? ""
          : o.client.check_agreement ? ", agreement check on (inca's host path)"
                                     : ", plain Gloo (agreement check off)")
      << "\n"
      << "#\n"
      << "#        size        count   type  redop      time    algbw    busbw  #wrong  path\n"
      << "#         (B)   (elements)                    (us)   (GB/s)   (GB/s)\n";
}

void PrintRow(const PerfOptions& o, const PerfRow& row, std::ostream& out) {
  out << std::setw(13) << row.bytes << std::setw(13) << row.count << std::setw(7)
      << wire::ToString(o.type) << std::setw(7) << wire::ToString(o.reduce) << std::fixed
      << std::setprecision(1) << std::setw(10) << row.time_us << std::setprecision(3)
      << std::setw(9) << row.algbw_gbps << std::setw(9) << row.busbw_gbps << std::setw(8)
      << row.wrong << "  " << row.path << (row.why.empty() ? "" : absl::StrCat(" (", row.why, ")"))
      << std::endl;
}

// [at_ns,window,srtt_us],... (the brackets around the list are the caller's).
std::string WindowTraceJson(const std::vector<WindowSample>& trace) {
  std::vector<std::string> items;
  items.reserve(trace.size());
  for (const WindowSample& w : trace) {
    items.push_back(absl::StrCat("[", w.at_ns, ",", absl::SixDigits(w.window_chunks), ",",
                                 absl::SixDigits(w.srtt_us), "]"));
  }
  return absl::StrJoin(items, ",");
}

void PrintFooter(const PerfOptions& o, const std::vector<PerfRow>& rows, std::ostream& out) {
  uint64_t wrong = 0;
  for (const auto& r : rows) wrong += r.wrong;
  out << "# " << (wrong == 0 ? "all results correct" : absl::StrCat(wrong, " wrong elements"))
      << "\n";
  if (!o.json) return;
  std::vector<std::string> items;
  for (const auto& r : rows) {
    items.push_back(absl::StrCat(
        "{\"bytes\":", r.bytes, ",\"count\":", r.count, ",\"time_us\":", r.time_us,
        ",\"algbw_gbps\":", r.algbw_gbps, ",\"busbw_gbps\":", r.busbw_gbps, ",\"wrong\":", r.wrong,
        ",\"chunks_sent\":", r.chunks_sent, ",\"chunks_retransmitted\":", r.chunks_retransmitted,
        ",\"competitive_entries\":", r.competitive_entries, ",\"path\":\"", r.path,
        "\",\"host_ops\":", r.host_ops, ",\"why\":\"", r.why, "\"", ",\"timeline_ns\":[",
        absl::StrJoin(r.timeline_ns, ","), "]", r.window_trace.empty() ? "" : ",\"window_trace\":[",
        WindowTraceJson(r.window_trace), r.window_trace.empty() ? "" : "]", "}"));
  }
  out << "{\"ranks\":" << o.ranks << ",\"backend\":\"" << (o.use_switch ? "switch" : "gloo")
      << "\",\"rows\":[" << absl::StrJoin(items, ",") << "]}" << std::endl;
}

// One rank of a job whose other ranks run elsewhere (RANK/WORLD_SIZE):
// after each size the ranks agree on the slowest time, the wrong elements
// and the host-path operations; rank 0 prints.
absl::StatusOr<std::vector<PerfRow>> RunOneRank(const PerfOptions& o,
                                                const std::vector<uint64_t>& sizes,
                                                std::ostream& out) {
  CommunicatorOptions co;
  co.switch_address = o.use_switch ? o.switch_address : "";
  co.store_address = absl::StrCat(o.master_addr, ":", o.master_port + 1);
  co.serve_store = o.rank == 0;
  co.bind_ip = o.bind_ip;
  co.switch_port = -1;
  std::vector<PerfRow> rows;
  if (o.rank == 0) {
    PrintHeader(o, o.use_switch ? absl::StrCat("switch ", o.switch_address) : "gloo (host path)",
                out);
  }
  const int code = RankBody(
      o, sizes, o.rank, co,
      [&](Communicator& c, const Record& rec, const std::vector<int64_t>& timeline) {
        float time_us = static_cast<float>(rec.mean_us);
        auto clamp = [](uint64_t v) {
          return static_cast<int32_t>(std::min<uint64_t>(v, INT32_MAX));
        };
        int32_t counts[5] = {clamp(rec.wrong), clamp(rec.host_ops), clamp(rec.sent),
                             clamp(rec.retransmitted), clamp(rec.competitive_entries)};
        // The time, the host-path operations and their reasons: the most any
        // rank saw (as the forking launcher); the rest summed.
        int32_t most[2] = {counts[1], static_cast<int32_t>(rec.reasons)};
        if (!c.AllReduce(&time_us, 1, DType::kF32, ReduceOp::kMax).ok() ||
            !c.AllReduce(most, 2, DType::kI32, ReduceOp::kMax).ok() ||
            !c.AllReduce(counts, 5, DType::kI32, ReduceOp::kSum).ok()) {
          return false;
        }
        PerfRow row = MakeRow(o, sizes[rec.index], time_us, static_cast<uint64_t>(counts[0]),
                              static_cast<uint32_t>(most[0]), static_cast<uint32_t>(most[1]));
        row.chunks_sent = static_cast<uint64_t>(counts[2]);
        row.chunks_retransmitted = static_cast<uint64_t>(counts[3]);
        row.competitive_entries = static_cast<uint64_t>(counts[4]);
        row.timeline_ns = timeline;
        if (o.rank == 0 && o.client.window_trace_samples > 0) row.window_trace = c.window_trace();
        if (o.rank == 0) PrintRow(o, row, out);
        rows.push_back(row);
        return true;
      });
  if (code != 0) {
    return absl::UnavailableError(
        absl::StrCat("rank ", o.rank, " of ", o.ranks, " failed (code ", code,
                     "): check MASTER_ADDR/MASTER_PORT, INCA_SWITCH and that every rank runs"));
  }
  if (o.rank == 0) PrintFooter(o, rows, out);
  return rows;
}

}  // namespace

absl::StatusOr<Collective> ParseCollective(const std::string& s) {
  if (s == "allreduce") return Collective::kAllReduce;
  if (s == "allgather") return Collective::kAllGather;
  if (s == "broadcast") return Collective::kBroadcast;
  if (s == "reducescatter") return Collective::kReduceScatter;
  return absl::InvalidArgumentError(
      absl::StrCat("op '", s, "' is not one of allreduce, allgather, broadcast, reducescatter"));
}

namespace {

// The options' own checks, before anything starts.
absl::Status CheckOptions(const PerfOptions& o) {
  // On one host at most 64 ranks; one rank of a multi-host job may belong
  // to a group across a tree of switches.
  const int most = o.rank >= 0 ? cais::kMaxTreeRanks : 64;
  if (o.ranks < 1 || o.ranks > most) {
    return absl::InvalidArgumentError(
        absl::StrCat(o.rank >= 0 ? "--world-size " : "--ranks ", o.ranks, " must be 1..", most));
  }
  if (o.min_bytes == 0 || o.max_bytes < o.min_bytes || !(o.factor > 1.0)) {
    return absl::InvalidArgumentError("need 0 < -b <= -e and -f > 1");
  }
  if (o.root < 0 || o.root >= o.ranks) {
    return absl::InvalidArgumentError(absl::StrCat("--root ", o.root, " must be < --ranks"));
  }
  if (o.timeout_s < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--timeout-s ", o.timeout_s, " must be at least 1"));
  }
  // Checked once here: every rank resolving a bad --switch printed the same
  // error once per rank.
  if (o.use_switch && !o.switch_address.empty()) {
    auto list = client::SwitchSet::Addresses(o.switch_address);
    if (!list.ok()) return list.status();
    for (const std::string& one : *list) {
      if (auto a = client::ResolveSwitchAddresses(one, o.bind_ip); !a.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--switch ", one, ": ", a.status().message()));
      }
    }
  }
  return absl::OkStatus();
}

// The sizes of the rows: min_bytes to max_bytes by factor, each a whole
// number of elements (AllGather, ReduceScatter: of every rank's block).
std::vector<uint64_t> Sizes(const PerfOptions& o) {
  const size_t esize = wire::ElementBytes(o.type);
  const bool blocked = o.op == Collective::kAllGather || o.op == Collective::kReduceScatter;
  const uint64_t unit = esize * (blocked ? static_cast<uint64_t>(o.ranks) : 1);
  std::vector<uint64_t> sizes;
  for (double b = static_cast<double>(o.min_bytes); b <= static_cast<double>(o.max_bytes) * 1.0001;
       b *= o.factor) {
    const uint64_t s = std::max<uint64_t>(unit, static_cast<uint64_t>(b) / unit * unit);
    if (sizes.empty() || sizes.back() != s) sizes.push_back(s);
  }
  return sizes;
}

// The switch the ranks use: the given address, or an inca-switchd started
// here (kept in *switchd) on a free loopback port.
absl::StatusOr<std::string> SwitchFor(const PerfOptions& o, launch::Process* switchd) {
  if (!o.switch_address.empty()) return o.switch_address;
  const std::string switch_addr = absl::StrCat("127.0.0.1:", launch::FreeLoopbackPort(true));
  // Ranks sharing a few cores arrive at a collective far apart; a chunk
  // timeout above that skew keeps them on the switch (flags may override).
  std::vector<std::string> args = {"--listen",         switch_addr,   "--log-level",   "warn",
                                   "--control-listen", "127.0.0.1:0", "--http-listen", "off"};
  if (std::find(o.switchd_args.begin(), o.switchd_args.end(), "--timeout-ms") ==
      o.switchd_args.end()) {
    args.insert(args.end(), {"--timeout-ms", "1000"});
  }
  // A perf tool measures a path, not a policy: the started switch takes
  // every operation unless the caller asks for a controller
  // (--switchd-arg=--offload-controller=embedded).
  const bool controller_given =
      std::any_of(o.switchd_args.begin(), o.switchd_args.end(),
                  [](const std::string& a) { return a.rfind("--offload-controller", 0) == 0; });
  if (!controller_given) args.insert(args.end(), {"--offload-controller", "off"});
  args.insert(args.end(), o.switchd_args.begin(), o.switchd_args.end());
  *switchd = launch::Process::Spawn(o.switchd_path, args, /*quiet_stdout=*/true);
  if (!switchd->running() || !launch::WaitForSwitch(switch_addr, std::chrono::seconds(10))) {
    return absl::UnavailableError(
        absl::StrCat("could not start ", o.switchd_path, " on ", switch_addr));
  }
  return switch_addr;
}

// One row from every rank's record of a size: the slowest rank's time,
// the ranks' wrong elements and chunks summed.
PerfRow CombineRanks(const PerfOptions& o, uint64_t bytes, const std::vector<Record>& recs) {
  double time_us = 0;
  uint64_t wrong = 0, sent = 0, again = 0, competitive = 0;
  uint32_t host = 0, reasons = 0;
  for (const auto& x : recs) {
    time_us = std::max(time_us, x.mean_us);
    wrong += x.wrong;
    host = std::max(host, x.host_ops);
    reasons |= x.reasons;
    sent += x.sent;
    again += x.retransmitted;
    competitive += x.competitive_entries;
  }
  PerfRow row = MakeRow(o, bytes, time_us, wrong, host, reasons);
  row.chunks_sent = sent;
  row.chunks_retransmitted = again;
  row.competitive_entries = competitive;
  return row;
}

}  // namespace

absl::StatusOr<std::vector<PerfRow>> RunPerf(const PerfOptions& o, std::ostream& out) {
  if (absl::Status s = CheckOptions(o); !s.ok()) return s;
  const std::vector<uint64_t> sizes = Sizes(o);

  if (o.rank >= 0) {
    if (o.rank >= o.ranks) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", o.rank, " must be below the world size ", o.ranks));
    }
    if (o.use_switch && o.switch_address.empty()) {
      return absl::InvalidArgumentError(
          "one rank of a job needs the switch's address: --switch HOST:PORT or INCA_SWITCH "
          "(INCA_SWITCH=none or --backend gloo for Gloo only)");
    }
    return RunOneRank(o, sizes, out);
  }
  launch::Process switchd;
  std::string switch_addr;
  if (o.use_switch) {
    auto addr = SwitchFor(o, &switchd);
    if (!addr.ok()) return addr.status();
    switch_addr = *addr;
  }
  const int store_port = launch::FreeLoopbackPort(false);

  std::vector<int> fds(static_cast<size_t>(o.ranks));
  std::vector<launch::Process> procs;
  const pid_t parent = getpid();
  for (int r = 0; r < o.ranks; ++r) {
    int p[2];
    if (pipe(p) != 0) return absl::InternalError("pipe failed");
    const pid_t pid = fork();
    if (pid == 0) {
      launch::DieWithParent(parent, SIGKILL);  // a killed cais-perf leaves no rank behind
      close(p[0]);
      _exit(RankMain(o, sizes, r, switch_addr, store_port, p[1]));
    }
    close(p[1]);
    fds[static_cast<size_t>(r)] = p[0];
    procs.emplace_back(pid);
  }

  PrintHeader(o,
              o.use_switch ? absl::StrCat("switch ", switch_addr,
                                          o.switch_address.empty() ? " (started by cais-perf)" : "")
                           : std::string("gloo (host path only)"),
              out);
  std::map<uint32_t, std::vector<Record>> got;
  std::vector<PerfRow> rows;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.timeout_s);
  size_t open_fds = fds.size();
  while (open_fds > 0 && std::chrono::steady_clock::now() < deadline) {
    std::vector<pollfd> pfds;
    for (int fd : fds) pfds.push_back({fd, POLLIN, 0});
    if (poll(pfds.data(), pfds.size(), 200) <= 0) continue;
    for (size_t r = 0; r < fds.size(); ++r) {
      if (fds[r] < 0 || (pfds[r].revents & (POLLIN | POLLHUP)) == 0) continue;
      Record rec;
      const ssize_t k = read(fds[r], &rec, sizeof(rec));
      if (k != sizeof(rec)) {
        close(fds[r]);
        fds[r] = -1;
        --open_fds;
        continue;
      }
      got[rec.index].push_back(rec);
      while (got.count(static_cast<uint32_t>(rows.size())) &&
             got[static_cast<uint32_t>(rows.size())].size() == fds.size()) {
        const PerfRow row =
            CombineRanks(o, sizes[rows.size()], got[static_cast<uint32_t>(rows.size())]);
        PrintRow(o, row, out);
        rows.push_back(row);
      }
    }
  }
  bool failed = false;
  for (size_t r = 0; r < procs.size(); ++r) {
    const int code = procs[r].Wait(std::chrono::seconds(5));
    if (code != 0) {
      failed = true;
      out << "# rank " << r << " " << (code < 0 ? "did not finish" : absl::StrCat("exited ", code))
          << "\n";
    }
  }
  if (switchd.running()) {
    switchd.Signal(SIGTERM);
    switchd.Wait(std::chrono::seconds(5));
  }
  if (failed || rows.size() != sizes.size()) {
    return absl::InternalError(
        absl::StrCat("cais-perf: ", rows.size(), " of ", sizes.size(), " sizes completed"));
  }
  PrintFooter(o, rows, out);
  return rows;
}

}  // namespace inca::perf
