#include "inca/sim/cais_scenario.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "inca/util/size.h"
#include "sim/cais_keys.h"
#include "sim/cais_network.h"
#include "sim/cais_nodes.h"
#include "sim/yaml_keys.h"

namespace inca::sim {

namespace {

using yaml_keys::Av;
using yaml_keys::Bad;
using yaml_keys::Get;

// A list key given as a YAML list or as one comma-separated scalar (what
// --set and --sweep pass).
std::vector<std::string> Items(const YAML::Node& v) {
  std::vector<std::string> out;
  if (v.IsSequence()) {
    for (const auto& x : v) out.push_back(x.Scalar());
  } else if (v.IsScalar()) {
    out = absl::StrSplit(v.Scalar(), ',', absl::SkipEmpty());
  }
  return out;
}

absl::Status SetSizes(const YAML::Node& v, std::string_view src, CaisSimScenario* s) {
  const std::vector<std::string> items = Items(v);
  if (items.empty()) return Bad(src, "sizes", "a list of sizes, e.g. [1M, 16M]");
  s->sizes.clear();
  for (const std::string& it : items) {
    auto b = util::ParseSize(it);
    if (!b.ok()) return Bad(src, "sizes", std::string(b.status().message()));
    s->sizes.push_back(*b);
  }
  return absl::OkStatus();
}

absl::Status SetMode(const YAML::Node& v, std::string_view src, CaisSimScenario* s) {
  if (auto st = Get(v, src, "mode", &s->mode); !st.ok()) return st;
  if (s->mode != "exact" && s->mode != "timing") {
    return Bad(src, "mode", absl::StrCat("'", s->mode, "': use exact or timing"));
  }
  return absl::OkStatus();
}

absl::Status SetPlacement(const YAML::Node& v, std::string_view src, CaisSimScenario* s) {
  if (auto st = Get(v, src, "placement", &s->placement); !st.ok()) return st;
  if (s->placement != "rack" && s->placement != "random") {
    return Bad(src, "placement", absl::StrCat("'", s->placement, "': use rack or random"));
  }
  return absl::OkStatus();
}

absl::Status SetBackends(const YAML::Node& v, std::string_view src, CaisSimScenario* s) {
  s->backends = Items(v);
  for (const std::string& b : s->backends) {
    if (b != "inca" && b != "ring" && b != "tree") {
      return Bad(src, "backends", absl::StrCat("'", b, "': use inca, ring and/or tree"));
    }
  }
  if (s->backends.empty()) return Bad(src, "backends", "at least one of inca, ring, tree");
  return absl::OkStatus();
}

absl::Status SetCollective(const YAML::Node& v, std::string_view src, CaisSimScenario* s) {
  if (auto st = Get(v, src, "collective", &s->collective); !st.ok()) return st;
  if (s->collective != "allreduce" && s->collective != "reduce_scatter" &&
      s->collective != "all_gather") {
    return Bad(src, "collective",
               absl::StrCat("'", s->collective, "': use allreduce, reduce_scatter or all_gather"));
  }
  return absl::OkStatus();
}

absl::Status SetMaxEvents(const YAML::Node& v, std::string_view src, CaisSimScenario* s) {
  return yaml_keys::GetCount(v, src, "max_events", 1, yaml_keys::kMaxEventsHi, &s->max_events);
}

absl::Status SetFlowBytes(const YAML::Node& v, std::string_view src, CaisSimScenario* s) {
  auto b = util::ParseSize(v.IsScalar() ? v.Scalar() : "");
  if (!b.ok()) return Bad(src, "background_flow_bytes", std::string(b.status().message()));
  s->background_flow_bytes = *b;
  return absl::OkStatus();
}

struct KeyDef {
  const char* name;
  absl::Status (*set)(const YAML::Node& v, std::string_view src, CaisSimScenario* s);
};

template <auto Member>
absl::Status Scalar(const YAML::Node& v, std::string_view src, const char* key,
                    CaisSimScenario* s) {
  return Get(v, src, key, &(s->*Member));
}

#define INCA_CAIS_KEY(field)                                                                      \
  KeyDef {                                                                                        \
#field, [](const YAML::Node& v, std::string_view src,                                         \
               CaisSimScenario* s) { return Scalar<&CaisSimScenario::field>(v, src, #field, s); } \
  }

// Every key of a CAIS scenario, once: the parser, --set and the error's
// list of known keys follow from it (docs/sim.md lists their meaning).
const KeyDef kKeys[] = {
    INCA_CAIS_KEY(name),
    INCA_CAIS_KEY(seed),
    {"max_events", &SetMaxEvents},
    {"backends", &SetBackends},
    {"mode", &SetMode},
    INCA_CAIS_KEY(hosts),
    INCA_CAIS_KEY(switches),
    INCA_CAIS_KEY(racks),
    INCA_CAIS_KEY(spines),
    INCA_CAIS_KEY(fat_tree_k),
    INCA_CAIS_KEY(uplink_gbps),
    {"placement", &SetPlacement},
    INCA_CAIS_KEY(jobs),
    INCA_CAIS_KEY(link_gbps),
    INCA_CAIS_KEY(link_delay_us),
    INCA_CAIS_KEY(queue_packets),
    INCA_CAIS_KEY(loss),
    INCA_CAIS_KEY(mtu),
    INCA_CAIS_KEY(overhead_bytes),
    INCA_CAIS_KEY(chunk_size),
    INCA_CAIS_KEY(host_payload),
    INCA_CAIS_KEY(host_packet_ns),
    INCA_CAIS_KEY(host_byte_ps),
    INCA_CAIS_KEY(host_cores),
    {"collective", &SetCollective},
    {"sizes", &SetSizes},
    INCA_CAIS_KEY(ops),
    INCA_CAIS_KEY(window),
    INCA_CAIS_KEY(target_floor_us),
    INCA_CAIS_KEY(form_groups),
    INCA_CAIS_KEY(switch_slots),
    INCA_CAIS_KEY(switch_sram_mib),
    INCA_CAIS_KEY(switch_mpps),
    INCA_CAIS_KEY(switch_queue_packets),
    INCA_CAIS_KEY(switch_group_share),
    INCA_CAIS_KEY(switch_advise_window),
    INCA_CAIS_KEY(ring_step_latency_us),
    INCA_CAIS_KEY(background_load),
    {"background_flow_bytes", &SetFlowBytes},
    INCA_CAIS_KEY(background_gbps),
};
#undef INCA_CAIS_KEY

absl::Status SetKey(const std::string& key, const YAML::Node& v, std::string_view src,
                    CaisSimScenario* s) {
  absl::Status st;
  if (yaml_keys::SystemOrSweep(key, v, src, "cais", "a CAIS scenario has system cais", s, SetKey,
                               &st)) {
    return st;
  }
  for (const KeyDef& k : kKeys) {
    if (key == k.name) return k.set(v, src, s);
  }
  return yaml_keys::UnknownKey(src, key, CaisKeyNames());
}

// Rank r's input: small integers, so that every order of summation gives
// the exact sum in f32 (at most 3 x 128 x 2,080 in magnitude for 8,192
// ranks, under 2^24), and each rank's block its own (ranks 64 apart are
// shifted along the pattern).
float Input(int rank, int op, size_t i) {
  const auto shift = static_cast<size_t>(op + rank / 64);
  return static_cast<float>(static_cast<int>((i + shift) % 7) - 3) *
         static_cast<float>(rank % 64 + 1);
}

// One plane's share of an operation: its stripe of the tensor on every
// rank, and how to check it.
struct Stripe {
  uint64_t bytes = 0;  // the stripe's share of the operation's bytes
  size_t base = 0;     // its first element's index in the inputs' pattern
  size_t count = 0;    // elements per rank held (see CutStripes)
  size_t per_block = 0;
  std::vector<std::vector<float>> data, own;  // per rank
};

// Stripe p of every rank's tensor goes over switch p: elements [pE/k,
// (p+1)E/k) of E (whole blocks for a reduce-scatter or all-gather, whose
// sizes are multiples of hosts x switches f32).
std::vector<Stripe> CutStripes(const CaisSimScenario& s, const std::string& backend,
                               uint64_t bytes) {
  const bool timing = s.mode == "timing";
  const bool blocked = CollectiveOp(s.collective) != wire::CaisOp::kAllReduce;
  const size_t n = static_cast<size_t>(s.hosts), k = static_cast<size_t>(s.switches);
  std::vector<Stripe> stripes(k);
  const uint64_t elements = bytes / sizeof(float);
  for (size_t p = 0; p < k; ++p) {
    Stripe& st = stripes[p];
    const uint64_t e0 = elements * p / k, e1 = elements * (p + 1) / k;
    st.bytes = (e1 - e0) * sizeof(float);
    st.base = static_cast<size_t>(e0);
    // Each rank's stripe, all blocks: every element (exact); one per chunk
    // (timing, inca; a block's chunks each); none carried (timing, the
    // host baselines).
    const uint64_t chunks = (st.bytes + s.chunk_size - 1) / s.chunk_size;
    const uint64_t block_chunks = (st.bytes / n + s.chunk_size - 1) / s.chunk_size;
    st.count = !timing             ? st.bytes / sizeof(float)
               : backend == "inca" ? (blocked ? n * block_chunks : chunks)
                                   : 0;
    st.per_block = st.count / n;
    st.data.resize(n);
    st.own.resize(n);
  }
  return stripes;
}

// Every rank's stripe filled with operation `op`'s inputs. An all-gather's
// input is the rank's own block; the stripe's other blocks are what it
// gathers.
void FillStripe(Stripe* st, wire::CaisOp kind, int op) {
  for (size_t r = 0; r < st->data.size(); ++r) {
    const int q = static_cast<int>(r);
    auto& d = st->data[r];
    d.assign(st->count, 0);
    const size_t b0 = r * st->per_block, b1 = b0 + st->per_block;
    for (size_t i = 0; i < st->count; ++i) {
      d[i] = kind != wire::CaisOp::kAllGather ? Input(q, op, st->base + i)
             : i >= b0 && i < b1              ? Input(q, op, st->base + i - b0)
                                              : -1.0F;
    }
    st->own[r].assign(kind != wire::CaisOp::kAllReduce ? st->per_block : 0, 0);
    if (kind == wire::CaisOp::kAllGather) {
      for (size_t i = 0; i < st->per_block; ++i) st->own[r][i] = Input(q, op, st->base + i);
    }
  }
}

// Elements of the stripe an operation leaves each rank.
size_t Results(wire::CaisOp kind, const Stripe& st) {
  return kind == wire::CaisOp::kReduceScatter ? st.per_block : st.count;
}

// The exact sums of operation `op` over stripe `st`, element by element
// (the inputs of ranks [q0, q1), one job's, added in rank order): an
// all-reduce's and a reduce-scatter's results. Once per operation and job,
// not once per rank.
std::vector<float> Sums(wire::CaisOp kind, const Stripe& st, int op, size_t q0, size_t q1) {
  std::vector<float> sum(kind == wire::CaisOp::kAllGather ? 0 : st.count, 0.0F);
  for (size_t q = q0; q < q1; ++q) {
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += Input(static_cast<int>(q), op, st.base + i);
  }
  return sum;
}

// Rank r's element e of what operation `op` leaves it on stripe `st`, what
// it should be (`sum`: Sums), and its place in its block (for the chunk it
// came in).
void Result(wire::CaisOp kind, bool inca, const Stripe& st, const std::vector<float>& sum, int op,
            size_t r, size_t e, float* got, float* want, size_t* in_block) {
  const size_t pb = st.per_block;
  switch (kind) {
    case wire::CaisOp::kReduceScatter:
      *got = inca ? st.own[r][e] : st.data[r][r * pb + e];
      *want = sum[r * pb + e];
      *in_block = e;
      return;
    case wire::CaisOp::kAllGather:
      *got = st.data[r][e];
      *want = Input(static_cast<int>(e / pb), op, st.base + e % pb);
      *in_block = e % pb;
      return;
    default:
      *got = st.data[r][e];
      *want = sum[e];
      *in_block = e;
  }
}

// Every rank's results on the stripe against the exact ones: wrong
// elements, and chunks left to the host path (not checked).
void CheckStripe(const CaisSimScenario& s, const std::string& backend, const Stripe& st,
                 const Plane& pl, int op, CaisSimRow* row) {
  const wire::CaisOp kind = CollectiveOp(s.collective);
  const bool timing = s.mode == "timing", inca = backend == "inca";
  const size_t results = Results(kind, st), m = static_cast<size_t>(s.JobRanks());
  std::vector<float> sum;
  for (size_t r = 0; r < st.data.size(); ++r) {
    if (r % m == 0) sum = Sums(kind, st, op, r, r + m);  // the job's first rank
    for (size_t e = 0; e < results; ++e) {
      float got = 0, want = 0;
      size_t i = 0;
      Result(kind, inca, st, sum, op, r, e, &got, &want, &i);
      // The chunk element i belongs to (timing mode: one element per chunk).
      const size_t c = timing ? i : i * sizeof(float) / s.chunk_size;
      const bool first = timing || i * sizeof(float) % s.chunk_size == 0;
      if (!pl.has(static_cast<int>(r), c)) {
        row->fallback_chunks += first;
        continue;
      }
      row->wrong += got != want;
    }
  }
}

// What every plane dropped (links, and the switch's pipeline), its
// background packets, and when the last group formed.
void CountPlanes(const Job& j, CaisSimRow* row) {
  for (const Plane& pl : j.planes) {
    for (Node* r : pl.ranks) {
      const LinkCounters* up = j.net->link(r, 0);
      if (up != nullptr) row->dropped += up->dropped_queue + up->dropped_loss + up->dropped_mtu;
    }
    for (const PipelinedSwitch* sw : pl.switches) {  // every link out of every switch
      for (dp::PortId port = 0;; ++port) {
        const LinkCounters* down = j.net->link(sw, port);
        if (down == nullptr) break;
        row->dropped += down->dropped_queue + down->dropped_loss + down->dropped_mtu;
      }
      row->dropped += sw->pipeline_dropped();
      if (const auto* cais = dynamic_cast<const CaisSwitchNode*>(sw)) {
        const auto& by = cais->reducer().totals().drops_by_reason;
        for (size_t i = 0; i < by.size(); ++i) row->switch_drops[i] += by[i];
      }
    }
    for (const BackgroundNode* b : pl.background) row->background_packets += b->packets();
    row->formation_us = std::max(row->formation_us, static_cast<double>(pl.formed_at) / 1e3);
  }
}

// The backend's closed form (seconds): the planes run side by side, so the
// widest stripe sets the time; with a host model, no rank finishes before
// its CPU has handled every packet it sends and receives, on every plane.
double ClosedFormSeconds(const CaisSimScenario& s, const std::string& backend,
                         const std::vector<Stripe>& stripes) {
  const wire::CaisOp kind = CollectiveOp(s.collective);
  const double rate = s.link_gbps * 1e9;
  const double delay = s.link_delay_us * 1e-6;
  const double alpha = s.ring_step_latency_us * 1e-6;
  const int hosts = s.JobRanks();  // each job's operation is its own
  const uint32_t chunk = s.chunk_size, payload = s.HostPayload(), over = s.overhead_bytes;
  uint64_t widest = 0;
  double cpu = 0;
  for (const Stripe& st : stripes) {
    widest = std::max(widest, st.bytes);
    cpu += HostSeconds(s, backend, st.bytes);
  }
  double closed = 0;
  if (backend == "inca") {
    closed = kind == wire::CaisOp::kReduceScatter
                 ? SwitchReduceScatterSeconds(hosts, widest, chunk, rate, over, delay)
             : kind == wire::CaisOp::kAllGather
                 ? SwitchAllGatherSeconds(hosts, widest, chunk, rate, over, delay)
                 : SwitchAllReduceSeconds(hosts, widest, chunk, rate, over, delay);
  } else if (backend == "ring") {
    closed = kind != wire::CaisOp::kAllReduce
                 ? RingHalfSeconds(hosts, widest, payload, rate, over, delay, alpha)
                 : RingAllReduceSeconds(hosts, widest, payload, rate, over, delay, alpha);
  } else {
    closed = TreeAllReduceSeconds(hosts, widest, payload, rate, over, delay, alpha);
  }
  // On a fabric, at least what the busiest uplink carries (cais_fabric.cc).
  if (s.IsFabric()) closed = std::max(closed, UplinkSeconds(s, backend, widest));
  return std::max(closed, cpu);
}

absl::StatusOr<CaisSimRow> RunOne(const CaisSimScenario& s, const std::string& backend,
                                  uint64_t bytes, const std::function<void(int)>& op_done,
                                  uint64_t* events) {
  Job j;
  j.net = std::make_unique<Network>(&j.sim, s.seed);
  const wire::CaisOp kind = CollectiveOp(s.collective);
  const size_t n = static_cast<size_t>(s.hosts), k = static_cast<size_t>(s.switches);
  std::vector<Stripe> stripes = CutStripes(s, backend, bytes);
  std::vector<double> durations_us;
  CaisSimRow row;
  row.backend = backend;
  row.bytes = bytes;
  size_t finished = 0;
  int op = 0;
  TimeNs started = 0;
  // Several jobs: ranks finished in each, and each one's time summed.
  const size_t m = static_cast<size_t>(s.JobRanks());
  std::vector<size_t> job_finished(n / m);
  std::vector<double> job_us(n / m, 0.0);
  auto start_op = [&] {
    started = j.sim.now();
    finished = 0;
    std::fill(job_finished.begin(), job_finished.end(), 0);
    for (Stripe& st : stripes) FillStripe(&st, kind, op);
    for (size_t p = 0; p < k; ++p) {
      Stripe& st = stripes[p];
      for (size_t r = 0; r < n; ++r) {
        j.planes[p].begin(static_cast<int>(r), st.count ? &st.data[r] : nullptr, &st.own[r],
                          st.bytes / sizeof(float));
      }
    }
  };
  // Done when every rank is, on every plane (`rank`: the global one).
  const RankDone done = [&](int rank) {
    const size_t job = static_cast<size_t>(rank) / m;
    if (++job_finished[job] == m * k)
      job_us[job] += static_cast<double>(j.sim.now() - started) / 1e3;
    if (++finished < n * k) return;
    durations_us.push_back(static_cast<double>(j.sim.now() - started) / 1e3);
    for (size_t p = 0; p < k; ++p) {
      row.retransmitted += j.planes[p].retransmitted();
      CheckStripe(s, backend, stripes[p], j.planes[p], op, &row);
    }
    op_done(op);
    if (++op < s.ops) j.sim.Schedule(j.sim.now(), start_op);
  };
  j.planes.resize(k);
  for (size_t p = 0; p < k; ++p) {
    if (absl::Status st = BuildPlane(s, backend, stripes[p].bytes, static_cast<int>(p), &j, done);
        !st.ok()) {
      return st;
    }
    auto bg = AddBackground(s, static_cast<int>(p), &j);
    if (!bg.ok()) return bg.status();
    j.planes[p].background = *bg;
  }
  j.net->Start();
  size_t ready = 0;
  for (Plane& pl : j.planes) {
    pl.when_ready([&] {
      if (++ready == k) j.sim.Schedule(j.sim.now(), start_op);
    });
  }
  constexpr TimeNs kLimit = TimeNs{3600} * 1'000'000'000;  // an hour of simulated time
  j.sim.set_event_budget(s.max_events > *events ? s.max_events - *events : 0);
  while (op < s.ops && j.sim.pending() > 0 && j.sim.now() < kLimit && !j.sim.budget_spent()) {
    j.sim.RunUntil(std::min(kLimit, j.sim.now() + 1'000'000'000));
  }
  *events += j.sim.events_run();
  if (op < s.ops && j.sim.budget_spent()) {
    return absl::ResourceExhaustedError(EventBudgetMessage(s.max_events));
  }
  if (op < s.ops) {
    return absl::DeadlineExceededError(absl::StrCat(
        backend, ", ", bytes, " B: operation ", op, " did not finish (",
        j.sim.pending() == 0 ? "nothing left to happen" : "an hour of simulated time", ")"));
  }
  CountPlanes(j, &row);
  row.op_us = durations_us;
  row.ops = s.ops;
  if (job_us.size() > 1) {
    for (double us : job_us) row.job_mean_us.push_back(us / s.ops);
  }
  for (const Stripe& st : stripes) row.checked += Results(kind, st);
  double sum = 0;
  row.min_us = *std::min_element(durations_us.begin(), durations_us.end());
  row.max_us = *std::max_element(durations_us.begin(), durations_us.end());
  for (double d : durations_us) sum += d;
  row.mean_us = sum / static_cast<double>(durations_us.size());
  row.closed_form_us = 1e6 * ClosedFormSeconds(s, backend, stripes);
  if (s.host_packet_ns > 0 || s.host_byte_ps > 0) {
    TimeNs busiest = 0;
    for (int r = 0; r < s.hosts; ++r) {
      if (const HostCounters* h = j.net->host(r)) busiest = std::max(busiest, h->busy_ns);
    }
    row.host_busy_us = static_cast<double>(busiest) / 1e3 / s.ops;
  }
  row.of_closed_form = row.closed_form_us / row.mean_us;
  return row;
}

}  // namespace

absl::Status CaisSimScenario::Validate() const {
  auto bad = [](const std::string& m) { return absl::InvalidArgumentError(m); };
  if (hosts < 2 || hosts > (IsFabric() ? 8192 : 256)) {
    return bad("hosts must be in [2, 256] (on a fabric: [2, 8192])");
  }
  if (switches < 1 || switches > 16) return bad("switches must be in [1, 16]");
  if (!(link_gbps > 0) || link_gbps > 10000) return bad("link_gbps must be in (0, 10000]");
  if (absl::Status st = ValidateFabric(); !st.ok()) return st;
  if (!(link_delay_us >= 0) || link_delay_us > 1e6) return bad("link_delay_us must be in [0, 1e6]");
  if (queue_packets < 1) return bad("queue_packets must be at least 1");
  if (!(loss >= 0) || loss >= 1) return bad("loss must be in [0, 1)");
  if (chunk_size < 4 || chunk_size % 4 != 0 || chunk_size > 65536) {
    return bad("chunk_size must be a multiple of 4 in [4, 65536]");
  }
  if (host_payload != 0 &&
      (host_payload < 4 || host_payload % 4 != 0 || host_payload + kRingHeaderBytes > mtu)) {
    return bad(absl::StrCat("host_payload must be 0 (chunk_size) or a multiple of 4 that fits ",
                            "mtu ", mtu, " with the ring's 16-byte header"));
  }
  if (chunk_size + wire::kCaisHeaderBytes > mtu) {
    return bad(
        absl::StrCat("chunk_size ", chunk_size, " + the 20-byte CAIS header exceeds mtu ", mtu));
  }
  if (ops < 1 || ops > 100000) return bad("ops must be in [1, 100000]");
  if (window < 1 || window > 65535) return bad("window must be in [1, 65535]");
  if (switch_slots < 1) return bad("switch_slots must be at least 1");
  if (!(switch_sram_mib > 0) || switch_sram_mib > 65536) {
    return bad("switch_sram_mib must be in (0, 65536]");
  }
  if (!(ring_step_latency_us >= 0)) return bad("ring_step_latency_us must be >= 0");
  if (!(switch_mpps >= 0) || switch_mpps > 1e6) return bad("switch_mpps must be in [0, 1e6]");
  if (!(target_floor_us >= 0 || target_floor_us == -1) || target_floor_us > 1e6) {
    return bad("target_floor_us must be in [0, 1e6], or -1 for the transport's default");
  }
  if (switch_queue_packets < 1) return bad("switch_queue_packets must be at least 1");
  if (!(switch_group_share >= 0) || switch_group_share > 1) {
    return bad("switch_group_share must be in [0, 1]");
  }
  if (absl::Status st = ValidateJobs(); !st.ok()) return st;
  if (!(background_load >= 0) || background_load >= 1) {
    return bad("background_load must be in [0, 1)");
  }
  if (background_flow_bytes < 4) return bad("background_flow_bytes must be at least 4");
  if (!(background_gbps >= 0) || background_gbps > 10000) {
    return bad("background_gbps must be in [0, 10000] (0: link_gbps)");
  }
  if (mode != "exact" && mode != "timing") return bad("mode must be exact or timing");
  if (!(host_packet_ns >= 0) || host_packet_ns > 1e9) {
    return bad("host_packet_ns must be in [0, 1e9]");
  }
  if (!(host_byte_ps >= 0) || host_byte_ps > 1e9) return bad("host_byte_ps must be in [0, 1e9]");
  if (host_cores < 1 || host_cores > 1024) return bad("host_cores must be in [1, 1024]");
  if (collective != "allreduce" && collective != "reduce_scatter" && collective != "all_gather") {
    return bad("collective must be allreduce, reduce_scatter or all_gather");
  }
  if (collective != "allreduce") {
    if (std::find(backends.begin(), backends.end(), "tree") != backends.end()) {
      return bad(absl::StrCat("collective ", collective, ": the tree runs allreduce only"));
    }
    for (uint64_t b : sizes) {
      const uint64_t blocks = static_cast<uint64_t>(hosts) * static_cast<uint64_t>(switches);
      if (b % (uint64_t{4} * blocks) != 0) {
        return bad(absl::StrCat("sizes: ", b, " B is not ", blocks,
                                " blocks of f32 (hosts x switches; collective ", collective, ")"));
      }
    }
  }
  if (backends.empty()) return bad("backends: at least one of inca, ring, tree");
  if (loss > 0 && std::any_of(backends.begin(), backends.end(),
                              [](const std::string& b) { return b != "inca"; })) {
    return bad(
        "loss: the ring and the tree assume a lossless fabric (NCCL over RoCE with PFC "
        "has no retransmission of its own); use backends: [inca] with loss");
  }
  for (uint64_t b : sizes) {
    if (b < 4 || b % 4 != 0) return bad(absl::StrCat("sizes: ", b, " is not a positive f32 size"));
    // Byte-exact: every rank's tensor is held.
    if (mode == "exact" && b * static_cast<uint64_t>(hosts) > (uint64_t{4} << 30)) {
      return bad(absl::StrCat("sizes: ", b, " B x ", hosts,
                              " hosts is over 4 GiB of tensors (mode: timing holds none)"));
    }
  }
  return absl::OkStatus();
}

absl::Status SetCaisKey(const std::string& key, const YAML::Node& v, std::string_view src,
                        CaisSimScenario* s) {
  return SetKey(key, v, src, s);
}

std::vector<std::string> CaisKeyNames() {
  std::vector<std::string> names;
  for (const KeyDef& k : kKeys) names.emplace_back(k.name);
  return names;
}

bool IsCaisScenario(std::string_view yaml) {
  return yaml_keys::IsSystem(yaml, "cais");
}

absl::StatusOr<CaisSimScenario> ParseCaisSimScenario(std::string_view yaml,
                                                     std::string_view source) {
  return yaml_keys::ParseScenario<CaisSimScenario>(yaml, source, SetKey);
}

absl::Status ApplyCaisOverride(std::string_view key_value, CaisSimScenario* s, bool validate) {
  return yaml_keys::ApplyOverride(key_value, s, SetKey, validate);
}

absl::StatusOr<CaisSimResult> RunCaisSimScenario(const CaisSimScenario& s,
                                                 const Progress& progress) {
  if (auto st = s.Validate(); !st.ok()) return st;
  const auto wall_start = std::chrono::steady_clock::now();
  CaisSimResult res;
  const double total = static_cast<double>(s.backends.size() * s.sizes.size()) * s.ops;
  double done_ops = 0;
  for (const std::string& backend : s.backends) {
    for (uint64_t bytes : s.sizes) {
      auto row = RunOne(
          s, backend, bytes,
          [&](int) {
            if (progress) progress(++done_ops / total);
          },
          &res.events);
      if (!row.ok()) return row.status();
      res.rows.push_back(*row);
    }
  }
  res.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  return res;
}

std::string SwitchDropsJson(const std::array<uint64_t, dp::kDropReasonCount>& drops) {
  std::string out = "{";
  for (size_t i = 0; i < drops.size(); ++i) {
    if (drops[i] == 0) continue;
    if (out.size() > 1) out += ",";
    absl::StrAppend(&out, "\"", std::string(dp::ToString(static_cast<dp::DropReason>(i))),
                    "\":", drops[i]);
  }
  return out + "}";
}

std::string CaisResultJson(const CaisSimScenario& s, const CaisSimResult& r) {
  std::ostringstream o;
  o.precision(10);
  o << "{\"name\":\"" << s.name << "\",\"system\":\"cais\",\"mode\":\"" << s.mode
    << "\",\"collective\":\"" << s.collective << "\",\"seed\":" << s.seed
    << ",\"hosts\":" << s.hosts << ",\"link_gbps\":" << s.link_gbps
    << ",\"link_delay_us\":" << s.link_delay_us << ",\"loss\":" << s.loss
    << ",\"chunk_size\":" << s.chunk_size << ",\"jobs\":" << s.jobs << ",\"events\":" << r.events
    << ",\"rows\":[";
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const CaisSimRow& x = r.rows[i];
    o << (i ? "," : "") << "{\"backend\":\"" << x.backend << "\",\"bytes\":" << x.bytes
      << ",\"ops\":" << x.ops << ",\"mean_us\":" << x.mean_us << ",\"min_us\":" << x.min_us
      << ",\"max_us\":" << x.max_us << ",\"closed_form_us\":" << x.closed_form_us
      << ",\"of_closed_form\":" << x.of_closed_form << ",\"checked\":" << x.checked
      << ",\"wrong\":" << x.wrong << ",\"fallback_chunks\":" << x.fallback_chunks
      << ",\"retransmitted\":" << x.retransmitted << ",\"dropped\":" << x.dropped
      << ",\"background_packets\":" << x.background_packets
      << ",\"formation_us\":" << x.formation_us << ",\"host_busy_us\":" << x.host_busy_us;
    o << ",\"switch_drops\":" << SwitchDropsJson(x.switch_drops);
    if (!x.job_mean_us.empty()) {
      o << ",\"job_mean_us\":[";
      for (size_t q = 0; q < x.job_mean_us.size(); ++q) o << (q ? "," : "") << x.job_mean_us[q];
      o << "]";
    }
    o << "}";
  }
  o << "]}";
  return o.str();
}

std::string CaisResultCsv(const CaisSimResult& r) {
  std::ostringstream o;
  o.precision(10);
  o << "backend,bytes,ops,mean_us,min_us,max_us,closed_form_us,of_closed_form,checked,wrong,"
       "fallback_chunks,retransmitted,dropped,background_packets\n";
  for (const CaisSimRow& x : r.rows) {
    o << x.backend << "," << x.bytes << "," << x.ops << "," << x.mean_us << "," << x.min_us << ","
      << x.max_us << "," << x.closed_form_us << "," << x.of_closed_form << "," << x.checked << ","
      << x.wrong << "," << x.fallback_chunks << "," << x.retransmitted << "," << x.dropped << ","
      << x.background_packets << "\n";
  }
  return o.str();
}

}  // namespace inca::sim
