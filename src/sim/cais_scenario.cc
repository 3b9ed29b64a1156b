#include "inca/sim/cais_scenario.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <random>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "inca/util/size.h"
#include "sim/cais_keys.h"
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
    {"backends", &SetBackends},
    {"mode", &SetMode},
    INCA_CAIS_KEY(hosts),
    INCA_CAIS_KEY(switches),
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
// the exact sum in f32.
float Input(int rank, int op, size_t i) {
  return static_cast<float>(static_cast<int>((i + static_cast<size_t>(op)) % 7) - 3) *
         static_cast<float>(rank + 1);
}

wire::CaisOp CollectiveOp(const std::string& c) {
  return c == "reduce_scatter" ? wire::CaisOp::kReduceScatter
         : c == "all_gather"   ? wire::CaisOp::kAllGather
                               : wire::CaisOp::kAllReduce;
}

// One switch of a run (a plane: striping has several) with its rank
// nodes, one per host (on the host's CPU, which the planes share), and
// what a run needs of them.
struct Plane {
  PipelinedSwitch* hub = nullptr;
  std::vector<Node*> ranks;
  BackgroundNode* background = nullptr;
  // Starts rank r on its stripe `data` (all blocks; nullptr in timing mode
  // for the host baselines) of `count` elements, and `block`, its own block
  // (inca: a reduce-scatter's output, an all-gather's input).
  std::function<void(int rank, std::vector<float>* data, std::vector<float>* block, size_t count)>
      begin;
  std::function<uint64_t()> retransmitted = [] { return uint64_t{0}; };
  // Runs `go` once every rank is ready for its first operation (inca with
  // form_groups: joined); at once otherwise.
  std::function<void(std::function<void()> go)> when_ready = [](std::function<void()> go) { go(); };
  // Whether rank r's switch path produced chunk c (the host baselines: always).
  std::function<bool(int r, size_t c)> has = [](int, size_t) { return true; };
  TimeNs formed_at = 0;
};

struct Job {
  Simulator sim;
  std::unique_ptr<Network> net;
  std::vector<Plane> planes;  // sized before any is built: lambdas point into it
};

// The ring's fabric is lossless (PFC holds the senders back), so its
// packets wait for the pipeline however many there are.
SwitchPipeline Pipeline(const CaisSimScenario& s, bool lossless) {
  return SwitchPipeline{s.switch_mpps * 1e6, lossless ? UINT32_MAX : s.switch_queue_packets};
}

// Rank r's node on host r's CPU, when the scenario has a host model.
void PutOnHost(const CaisSimScenario& s, Network* net, Node* node, int r) {
  if (s.host_packet_ns <= 0 && s.host_byte_ps <= 0) return;
  net->SetHost(
      node, r,
      HostCost{static_cast<TimeNs>(std::llround(s.host_packet_ns)), s.host_byte_ps, s.host_cores});
}

LinkConfig Links(const CaisSimScenario& s) {
  LinkConfig lc;
  lc.rate_bps = s.link_gbps * 1e9;
  lc.delay_ns = static_cast<TimeNs>(std::llround(s.link_delay_us * 1e3));
  lc.mtu_bytes = s.mtu;
  lc.overhead_bytes = s.overhead_bytes;
  lc.queue_packets = s.queue_packets;
  lc.loss = s.loss;
  return lc;
}

void BuildInca(const CaisSimScenario& s, uint64_t bytes, int plane, Job* j, const RankDone& done) {
  Plane* pl = &j->planes[static_cast<size_t>(plane)];
  cais::CaisConfig cc;
  cc.sram_bytes = static_cast<size_t>(s.switch_sram_mib * 1024 * 1024);
  cc.max_pending_chunks = s.switch_slots;
  cc.max_payload_bytes = s.chunk_size;
  VirtualChunks virt;
  std::shared_ptr<VirtualLedger> ledger;
  const wire::CaisOp op = CollectiveOp(s.collective);
  if (s.mode == "timing") {
    // A reduce-scatter's or all-gather's chunks stand for one block's bytes.
    virt = {s.chunk_size, op == wire::CaisOp::kAllReduce ? bytes : bytes / s.hosts};
    ledger = std::make_shared<VirtualLedger>();
    // One f32 per chunk, and as many slot cells as the real chunks get.
    const size_t cells = cc.sram_bytes / cc.cell_bytes();
    cc.max_payload_bytes = sizeof(float);
    cc.sram_bytes = std::max<size_t>(1, cells) * cc.cell_bytes();
  }
  auto* sw = j->net->Add(std::make_unique<CaisSwitchNode>(absl::StrCat("switch", plane), cc,
                                                          s.hosts, ledger, Pipeline(s, false)));
  pl->hub = sw;
  // As SwitchTransport sets it from CommunicatorOptions.
  client::TransportConfig tc;
  tc.world_size = s.hosts;
  tc.chunk_size = s.mode == "timing" ? sizeof(float) : s.chunk_size;
  tc.max_window = s.window;
  tc.min_window = std::min<uint32_t>(2, s.window);
  tc.initial_window = std::min<uint32_t>(16, s.window);
  if (s.target_floor_us >= 0) tc.target_floor_ns = std::llround(s.target_floor_us * 1e3);
  std::vector<CaisRankNode*> ranks;
  for (int r = 0; r < s.hosts; ++r) {
    auto* node = j->net->Add(std::make_unique<CaisRankNode>(absl::StrCat("rank", r, ".", plane), r,
                                                            tc, done, virt, ledger));
    j->net->Connect(node, sw, Links(s));  // the switch's port r
    PutOnHost(s, j->net.get(), node, r);
    ranks.push_back(node);
    pl->ranks.push_back(node);
  }
  if (s.form_groups) {
    // The switch's first seq_base and the job id are drawn from the seed,
    // as inca-switchd and rank 0 draw them at random.
    std::mt19937_64 draw(s.seed ^ 0x6a6f696eULL ^ (static_cast<uint64_t>(plane) << 32));
    sw->FormGroups(static_cast<uint32_t>(draw()));
    const uint64_t job = draw() | 1;
    auto go = std::make_shared<std::function<void()>>();
    auto joined = std::make_shared<int>(0);
    for (CaisRankNode* rank : ranks) {
      rank->JoinFirst(job, [j, pl, go, joined, n = s.hosts](int) {
        if (++*joined < n) return;
        pl->formed_at = j->sim.now();
        if (*go) (*go)();
      });
    }
    pl->when_ready = [go](std::function<void()> f) { *go = std::move(f); };
  }
  pl->begin = [ranks, op](int r, std::vector<float>* data, std::vector<float>* block, size_t) {
    CaisRankNode* rank = ranks[static_cast<size_t>(r)];
    // Pieces take sequence numbers of their own.
    if (op == wire::CaisOp::kAllGather) {
      rank->Begin(rank->next_seq(), op, block, data);
    } else {
      rank->Begin(rank->next_seq(), op, data, block);
    }
  };
  // A reduce-scatter's or all-gather's chunks are numbered over all blocks
  // of each piece: a rank either completed the operation or is taken to
  // have handed all of it to the host path.
  pl->has = [ranks, op](int r, size_t c) {
    const auto& res = ranks[static_cast<size_t>(r)]->result();
    if (op != wire::CaisOp::kAllReduce) return res.complete;
    return c < res.have.size() && res.have[c] != 0;
  };
  pl->retransmitted = [ranks] {
    uint64_t n = 0;
    for (const auto* r : ranks) n += r->result().retransmitted;
    return n;
  };
}

// A host baseline (RingRankNode or TreeRankNode) through the switch as a
// forwarder.
template <typename RankNode>
void BuildHostBaseline(const CaisSimScenario& s, int plane, Job* j, const RankDone& done) {
  Plane* pl = &j->planes[static_cast<size_t>(plane)];
  auto* fwd = j->net->Add(
      std::make_unique<ForwarderNode>(absl::StrCat("switch", plane), Pipeline(s, true)));
  pl->hub = fwd;
  std::vector<RankNode*> ranks;
  const auto alpha = static_cast<TimeNs>(std::llround(s.ring_step_latency_us * 1e3));
  for (int r = 0; r < s.hosts; ++r) {
    auto* node = j->net->Add(std::make_unique<RankNode>(absl::StrCat("rank", r, ".", plane), r,
                                                        s.hosts, s.HostPayload(), s.link_gbps * 1e9,
                                                        s.overhead_bytes, alpha, done));
    LinkConfig lossless = Links(s);  // PFC: a full queue holds the sender back, drops nothing
    lossless.queue_packets = UINT32_MAX;
    j->net->Connect(node, fwd, lossless);
    PutOnHost(s, j->net.get(), node, r);
    ranks.push_back(node);
    pl->ranks.push_back(node);
  }
  const wire::CaisOp op = CollectiveOp(s.collective);
  pl->begin = [ranks, op](int r, std::vector<float>* data, std::vector<float>*, size_t count) {
    ranks[static_cast<size_t>(r)]->Begin(data, count, op);
  };
}
// Other traffic through the plane's switch's last port, on a link that
// carries all of it (so only the ranks' downlinks are shared); nullptr
// without load.
BackgroundNode* AddBackground(const CaisSimScenario& s, int plane, Job* j) {
  if (s.background_load <= 0) return nullptr;
  const BackgroundTraffic t{s.background_load, s.background_flow_bytes, s.background_gbps * 1e9};
  auto* bg = j->net->Add(std::make_unique<BackgroundNode>(
      absl::StrCat("background", plane), s.hosts, s.link_gbps * 1e9, t, s.chunk_size,
      s.overhead_bytes, s.seed + 1 + static_cast<uint64_t>(plane)));
  LinkConfig lc = Links(s);
  lc.rate_bps *= s.hosts;
  lc.loss = 0;
  lc.queue_packets = UINT32_MAX;
  j->net->Connect(bg, j->planes[static_cast<size_t>(plane)].hub, lc);
  return bg;
}

// The CPU time one rank's packets cost (host model), over its cores: what
// each backend sends and receives per rank, headers included.
double HostSeconds(const CaisSimScenario& s, const std::string& backend, uint64_t bytes) {
  if (s.host_packet_ns <= 0 && s.host_byte_ps <= 0) return 0;
  const auto n = static_cast<uint64_t>(s.hosts);
  const wire::CaisOp kind = CollectiveOp(s.collective);
  double packets = 0, carried = 0;
  if (backend == "inca") {
    const uint64_t c = s.chunk_size, h = wire::kCaisHeaderBytes;
    const uint64_t block = bytes / n, cpb = (block + c - 1) / c, all = (bytes + c - 1) / c;
    switch (kind) {
      case wire::CaisOp::kReduceScatter:  // all blocks up; its own block and n-1 ACKs down
        packets = static_cast<double>(2 * n * cpb);
        carried = static_cast<double>(bytes + block + 2 * n * cpb * h);
        break;
      case wire::CaisOp::kAllGather:  // its block up, every block down
        packets = static_cast<double>((n + 1) * cpb);
        carried = static_cast<double>(block + bytes + (n + 1) * cpb * h);
        break;
      default:  // every chunk up and its result down
        packets = static_cast<double>(2 * all);
        carried = static_cast<double>(2 * (bytes + all * h));
    }
  } else {
    // The ring: 2(n-1) steps (n-1 for a half), a block each way per step;
    // the tree: no closed count, its bound is the network's.
    if (backend != "ring") return 0;
    const uint64_t p = s.HostPayload(), block = (bytes / 4 + n - 1) / n * 4;
    const double steps =
        (kind == wire::CaisOp::kAllReduce ? 2.0 : 1.0) * static_cast<double>(n - 1);
    const double per_block = static_cast<double>((block + p - 1) / p);
    packets = 2 * steps * per_block;
    carried = 2 * steps * (static_cast<double>(block) + per_block * kRingHeaderBytes);
  }
  return (packets * s.host_packet_ns + carried * s.host_byte_ps / 1e3) * 1e-9 / s.host_cores;
}

// One plane's share of an operation: its stripe of the tensor on every
// rank, and how to check it.
struct Stripe {
  uint64_t bytes = 0;  // the stripe's share of the operation's bytes
  size_t base = 0;     // its first element's index in the inputs' pattern
  size_t count = 0;    // elements per rank held (see RunOne)
  size_t per_block = 0;
  std::vector<std::vector<float>> data, own;  // per rank
};

absl::StatusOr<CaisSimRow> RunOne(const CaisSimScenario& s, const std::string& backend,
                                  uint64_t bytes, const std::function<void(int)>& op_done,
                                  uint64_t* events) {
  Job j;
  j.net = std::make_unique<Network>(&j.sim, s.seed);
  const bool timing = s.mode == "timing";
  const wire::CaisOp kind = CollectiveOp(s.collective);
  const bool blocked = kind != wire::CaisOp::kAllReduce;
  const size_t n = static_cast<size_t>(s.hosts);
  const size_t k = static_cast<size_t>(s.switches);
  // Stripe p of every rank's tensor goes over switch p: elements [pE/k,
  // (p+1)E/k) of E (whole blocks for a reduce-scatter or all-gather, whose
  // sizes are multiples of hosts x switches f32).
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
  std::vector<double> durations_us;
  CaisSimRow row;
  row.backend = backend;
  row.bytes = bytes;
  size_t finished = 0;
  int op = 0;
  TimeNs started = 0;
  auto start_op = [&] {
    started = j.sim.now();
    finished = 0;
    for (size_t p = 0; p < k; ++p) {
      Stripe& st = stripes[p];
      for (size_t r = 0; r < n; ++r) {
        const int q = static_cast<int>(r);
        auto& d = st.data[r];
        d.assign(st.count, 0);
        // An all-gather's input is the rank's own block; the stripe's other
        // blocks are what it gathers.
        const size_t b0 = r * st.per_block, b1 = b0 + st.per_block;
        for (size_t i = 0; i < st.count; ++i) {
          d[i] = kind != wire::CaisOp::kAllGather ? Input(q, op, st.base + i)
                 : i >= b0 && i < b1              ? Input(q, op, st.base + i - b0)
                                                  : -1.0F;
        }
        st.own[r].assign(blocked ? st.per_block : 0, 0);
        if (kind == wire::CaisOp::kAllGather) {
          for (size_t i = 0; i < st.per_block; ++i) st.own[r][i] = Input(q, op, st.base + i);
        }
      }
    }
    for (size_t p = 0; p < k; ++p) {
      Stripe& st = stripes[p];
      for (size_t r = 0; r < n; ++r) {
        j.planes[p].begin(static_cast<int>(r), st.count ? &st.data[r] : nullptr, &st.own[r],
                          st.bytes / sizeof(float));
      }
    }
  };
  // Rank r's element e of what the operation leaves it on stripe `st`, what
  // it should be, and its place in its block (for the chunk it came in).
  auto results = [&](const Stripe& st) {
    return kind == wire::CaisOp::kReduceScatter ? st.per_block : st.count;
  };
  auto result = [&](const Stripe& st, size_t r, size_t e, float* got, float* want,
                    size_t* in_block) {
    const size_t pb = st.per_block;
    switch (kind) {
      case wire::CaisOp::kReduceScatter: {
        *got = backend == "inca" ? st.own[r][e] : st.data[r][r * pb + e];
        *want = 0;
        for (size_t q = 0; q < n; ++q) {
          *want += Input(static_cast<int>(q), op, st.base + r * pb + e);
        }
        *in_block = e;
        return;
      }
      case wire::CaisOp::kAllGather:
        *got = st.data[r][e];
        *want = Input(static_cast<int>(e / pb), op, st.base + e % pb);
        *in_block = e % pb;
        return;
      default:
        *got = st.data[r][e];
        *want = 0;
        for (size_t q = 0; q < n; ++q) *want += Input(static_cast<int>(q), op, st.base + e);
        *in_block = e;
    }
  };
  auto check = [&] {
    for (size_t p = 0; p < k; ++p) {
      const Stripe& st = stripes[p];
      for (size_t r = 0; r < n; ++r) {
        for (size_t e = 0; e < results(st); ++e) {
          float got = 0, want = 0;
          size_t i = 0;
          result(st, r, e, &got, &want, &i);
          // The chunk element i belongs to (timing mode: one element per chunk).
          const size_t c = timing ? i : i * sizeof(float) / s.chunk_size;
          const bool first = timing || i * sizeof(float) % s.chunk_size == 0;
          if (!j.planes[p].has(static_cast<int>(r), c)) {
            row.fallback_chunks += first;
            continue;
          }
          row.wrong += got != want;
        }
      }
    }
  };
  // Every rank on every plane.
  const RankDone done = [&](int) {
    if (++finished < n * k) return;
    durations_us.push_back(static_cast<double>(j.sim.now() - started) / 1e3);
    for (const Plane& pl : j.planes) row.retransmitted += pl.retransmitted();
    check();
    op_done(op);
    if (++op < s.ops) j.sim.Schedule(j.sim.now(), start_op);
  };
  j.planes.resize(k);
  for (size_t p = 0; p < k; ++p) {
    const int plane = static_cast<int>(p);
    if (backend == "inca") {
      BuildInca(s, stripes[p].bytes, plane, &j, done);
    } else if (backend == "ring") {
      BuildHostBaseline<RingRankNode>(s, plane, &j, done);
    } else {
      BuildHostBaseline<TreeRankNode>(s, plane, &j, done);
    }
    j.planes[p].background = AddBackground(s, plane, &j);
  }
  j.net->Start();
  size_t ready = 0;
  for (Plane& pl : j.planes) {
    pl.when_ready([&] {
      if (++ready == k) j.sim.Schedule(j.sim.now(), start_op);
    });
  }
  constexpr TimeNs kLimit = TimeNs{3600} * 1'000'000'000;  // an hour of simulated time
  while (op < s.ops && j.sim.pending() > 0 && j.sim.now() < kLimit) {
    j.sim.RunUntil(std::min(kLimit, j.sim.now() + 1'000'000'000));
  }
  *events += j.sim.events_run();
  if (op < s.ops) {
    return absl::DeadlineExceededError(absl::StrCat(
        backend, ", ", bytes, " B: operation ", op, " did not finish (",
        j.sim.pending() == 0 ? "nothing left to happen" : "an hour of simulated time", ")"));
  }
  for (const Plane& pl : j.planes) {
    for (Node* r : pl.ranks) {
      const LinkCounters& up = j.net->link(r, 0);
      row.dropped += up.dropped_queue + up.dropped_loss + up.dropped_mtu;
    }
    for (int port = 0; port < s.hosts; ++port) {
      const LinkCounters& down = j.net->link(pl.hub, static_cast<dp::PortId>(port));
      row.dropped += down.dropped_queue + down.dropped_loss + down.dropped_mtu;
    }
    row.dropped += pl.hub->pipeline_dropped();
    if (pl.background != nullptr) row.background_packets += pl.background->packets();
    row.formation_us = std::max(row.formation_us, static_cast<double>(pl.formed_at) / 1e3);
  }
  row.op_us = durations_us;
  row.ops = s.ops;
  for (const Stripe& st : stripes) row.checked += results(st);
  double sum = 0;
  row.min_us = *std::min_element(durations_us.begin(), durations_us.end());
  row.max_us = *std::max_element(durations_us.begin(), durations_us.end());
  for (double d : durations_us) sum += d;
  row.mean_us = sum / static_cast<double>(durations_us.size());
  const double rate = s.link_gbps * 1e9, delay = s.link_delay_us * 1e-6;
  const double alpha = s.ring_step_latency_us * 1e-6;
  const int hosts = s.hosts;
  const uint32_t chunk = s.chunk_size, payload = s.HostPayload(), over = s.overhead_bytes;
  // The planes run side by side: the largest stripe sets the time.
  uint64_t widest = 0;
  for (const Stripe& st : stripes) widest = std::max(widest, st.bytes);
  double closed = 0;
  if (backend == "inca") {
    closed = kind == wire::CaisOp::kReduceScatter
                 ? SwitchReduceScatterSeconds(hosts, widest, chunk, rate, over, delay)
             : kind == wire::CaisOp::kAllGather
                 ? SwitchAllGatherSeconds(hosts, widest, chunk, rate, over, delay)
                 : SwitchAllReduceSeconds(hosts, widest, chunk, rate, over, delay);
  } else if (backend == "ring") {
    closed = blocked ? RingHalfSeconds(hosts, widest, payload, rate, over, delay, alpha)
                     : RingAllReduceSeconds(hosts, widest, payload, rate, over, delay, alpha);
  } else {
    closed = TreeAllReduceSeconds(hosts, widest, payload, rate, over, delay, alpha);
  }
  // With a host model, no rank finishes before its CPU has handled every
  // packet it sends and receives, on every plane.
  double cpu = 0;
  for (const Stripe& st : stripes) cpu += HostSeconds(s, backend, st.bytes);
  closed = std::max(closed, cpu);
  row.closed_form_us = 1e6 * closed;
  if (s.host_packet_ns > 0 || s.host_byte_ps > 0) {
    TimeNs busiest = 0;
    for (int r = 0; r < s.hosts; ++r) busiest = std::max(busiest, j.net->host(r).busy_ns);
    row.host_busy_us = static_cast<double>(busiest) / 1e3 / s.ops;
  }
  row.of_closed_form = row.closed_form_us / row.mean_us;
  return row;
}

double PacketSeconds(uint64_t payload, uint32_t header, uint32_t overhead, double rate_bps) {
  return static_cast<double>(payload + header + overhead) * 8 / rate_bps;
}

}  // namespace

absl::Status CaisSimScenario::Validate() const {
  auto bad = [](const std::string& m) { return absl::InvalidArgumentError(m); };
  if (hosts < 2 || hosts > 256) return bad("hosts must be in [2, 256]");
  if (switches < 1 || switches > 16) return bad("switches must be in [1, 16]");
  if (!(link_gbps > 0) || link_gbps > 10000) return bad("link_gbps must be in (0, 10000]");
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
  try {
    const YAML::Node root = YAML::Load(std::string(yaml));
    return root.IsMap() && root["system"] && root["system"].IsScalar() &&
           root["system"].Scalar() == "cais";
  } catch (const YAML::Exception&) {
    return false;
  }
}

absl::StatusOr<CaisSimScenario> ParseCaisSimScenario(std::string_view yaml,
                                                     std::string_view source) {
  return yaml_keys::ParseScenario<CaisSimScenario>(yaml, source, SetKey);
}

absl::Status ApplyCaisOverride(std::string_view key_value, CaisSimScenario* s) {
  return yaml_keys::ApplyOverride(key_value, s, SetKey);
}

namespace {

// A block of `bytes` in chunks of `chunk`, back to back, and its last
// chunk's time.
std::pair<double, double> ChunkTrain(uint64_t bytes, uint32_t chunk, double rate_bps,
                                     uint32_t overhead) {
  const uint64_t full = bytes / chunk, rest = bytes % chunk;
  const double t_full = PacketSeconds(chunk, wire::kCaisHeaderBytes, overhead, rate_bps);
  const double t_rest = rest ? PacketSeconds(rest, wire::kCaisHeaderBytes, overhead, rate_bps) : 0;
  return {static_cast<double>(full) * t_full + t_rest, rest ? t_rest : t_full};
}

// The ring's 2(n-1) steps (`halves` 2) or n-1 (1).
double RingSeconds(int hosts, uint64_t bytes, uint32_t payload, double rate_bps, uint32_t overhead,
                   double delay_s, double step_latency_s, int halves) {
  // One block (the largest) per step: B, its packets back to back; t0 and
  // tl, its first and last packet's serialisation. A packet reaches the next
  // rank L = 2 t + 2 delay after it starts (up to the switch, down again).
  const uint64_t n = static_cast<uint64_t>(hosts);
  const uint64_t count = bytes / sizeof(float);
  const uint64_t block = (count + n - 1) / n * sizeof(float);
  const uint64_t per = payload / sizeof(float) * sizeof(float);
  const uint64_t full = block / per, rest = block % per;
  const double t0 = PacketSeconds(full ? per : rest, kRingHeaderBytes, overhead, rate_bps);
  const double tl = PacketSeconds(rest ? rest : per, kRingHeaderBytes, overhead, rate_bps);
  const double b =
      static_cast<double>(full) * PacketSeconds(per, kRingHeaderBytes, overhead, rate_bps) +
      (rest ? tl : 0);
  const double steps = halves * static_cast<double>(n - 1);
  const double hop = step_latency_s + 2 * t0 + 2 * delay_s;
  // Either the sender never idles (a block outlasts a hop: bandwidth-bound),
  // or each step's first packet waits for the previous step's (latency-bound).
  const double last_start = std::max(steps * b - tl, (steps - 1) * hop + b - tl);
  return step_latency_s + last_start + 2 * tl + 2 * delay_s;
}

}  // namespace

double SwitchAllReduceSeconds(int hosts, uint64_t bytes, uint32_t chunk, double rate_bps,
                              uint32_t overhead, double delay_s) {
  (void)hosts;  // every rank's uplink carries the tensor once, in parallel
  // Every chunk up at line rate, pipelined; the last one's result down.
  const auto [train, last] = ChunkTrain(bytes, chunk, rate_bps, overhead);
  return train + last + 2 * delay_s;
}

double SwitchReduceScatterSeconds(int hosts, uint64_t bytes, uint32_t chunk, double rate_bps,
                                  uint32_t overhead, double delay_s) {
  // Every block up (the uplink is the busier way: a rank gets its own block
  // and a 20-byte ACK for each other chunk), and the last result down.
  const auto [train, last] =
      ChunkTrain(bytes / static_cast<uint64_t>(hosts), chunk, rate_bps, overhead);
  return hosts * train + last + 2 * delay_s;
}

double SwitchAllGatherSeconds(int hosts, uint64_t bytes, uint32_t chunk, double rate_bps,
                              uint32_t overhead, double delay_s) {
  // The first chunk up, then every block down, the rank's own included (the
  // switch sends each chunk to all ports: to its owner it is the ACK).
  const uint64_t block = bytes / static_cast<uint64_t>(hosts);
  const double train = ChunkTrain(block, chunk, rate_bps, overhead).first;
  const double first =
      PacketSeconds(std::min<uint64_t>(block, chunk), wire::kCaisHeaderBytes, overhead, rate_bps);
  return first + hosts * train + 2 * delay_s;
}

double RingAllReduceSeconds(int hosts, uint64_t bytes, uint32_t payload, double rate_bps,
                            uint32_t overhead, double delay_s, double step_latency_s) {
  return RingSeconds(hosts, bytes, payload, rate_bps, overhead, delay_s, step_latency_s, 2);
}

double RingHalfSeconds(int hosts, uint64_t bytes, uint32_t payload, double rate_bps,
                       uint32_t overhead, double delay_s, double step_latency_s) {
  return RingSeconds(hosts, bytes, payload, rate_bps, overhead, delay_s, step_latency_s, 1);
}

double TreeAllReduceSeconds(int hosts, uint64_t bytes, uint32_t payload, double rate_bps,
                            uint32_t overhead, double delay_s, double step_latency_s) {
  // Each half of the tensor goes up one tree and down again. Bandwidth: the
  // busiest rank's link carries, per tree, the half up to its parent and
  // down to each child (and as much the other way). Latency: the first
  // packet climbs the deeper tree and comes down it, a hop each level, and
  // the half's other packets follow it. Both are lower bounds; the time is
  // the larger (the bandwidth one plus the last packet's trip).
  const uint64_t count = bytes / sizeof(float);
  const uint64_t per = payload / sizeof(float);
  double half_s[2] = {0, 0}, first_s[2] = {0, 0};
  for (int tree = 0; tree < 2; ++tree) {
    const uint64_t len = tree == 0 ? count / 2 : count - count / 2;
    const uint64_t packets = (len + per - 1) / per;
    half_s[tree] =
        static_cast<double>(len * sizeof(float) + packets * (kRingHeaderBytes + overhead)) * 8 /
        rate_bps;
    if (len) {
      first_s[tree] =
          PacketSeconds(std::min(per, len) * sizeof(float), kRingHeaderBytes, overhead, rate_bps);
    }
  }
  double busiest = 0, latency = 0, trip = 0;
  for (int tree = 0; tree < 2; ++tree) {
    if (half_s[tree] == 0) continue;
    const double hop = step_latency_s + 2 * first_s[tree] + 2 * delay_s;
    trip = std::max(trip, hop - first_s[tree]);
    int depth = 0;
    for (int r = 0; r < hosts; ++r) {
      int d = 0;
      for (int q = r; TreeRankNode::Parent(hosts, tree, q) >= 0;
           q = TreeRankNode::Parent(hosts, tree, q)) {
        ++d;
      }
      depth = std::max(depth, d);
    }
    latency = std::max(latency, 2.0 * depth * hop + half_s[tree] - first_s[tree]);
  }
  for (int r = 0; r < hosts; ++r) {
    double load = 0;
    for (int tree = 0; tree < 2; ++tree) {
      load += half_s[tree] * static_cast<double>(TreeRankNode::Children(hosts, tree, r).size() +
                                                 (TreeRankNode::Parent(hosts, tree, r) >= 0));
    }
    busiest = std::max(busiest, load);
  }
  return std::max(busiest + trip, latency);
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

std::string CaisResultJson(const CaisSimScenario& s, const CaisSimResult& r) {
  std::ostringstream o;
  o.precision(10);
  o << "{\"name\":\"" << s.name << "\",\"system\":\"cais\",\"mode\":\"" << s.mode
    << "\",\"collective\":\"" << s.collective << "\",\"seed\":" << s.seed
    << ",\"hosts\":" << s.hosts << ",\"link_gbps\":" << s.link_gbps
    << ",\"link_delay_us\":" << s.link_delay_us << ",\"loss\":" << s.loss
    << ",\"chunk_size\":" << s.chunk_size << ",\"events\":" << r.events << ",\"rows\":[";
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const CaisSimRow& x = r.rows[i];
    o << (i ? "," : "") << "{\"backend\":\"" << x.backend << "\",\"bytes\":" << x.bytes
      << ",\"ops\":" << x.ops << ",\"mean_us\":" << x.mean_us << ",\"min_us\":" << x.min_us
      << ",\"max_us\":" << x.max_us << ",\"closed_form_us\":" << x.closed_form_us
      << ",\"of_closed_form\":" << x.of_closed_form << ",\"checked\":" << x.checked
      << ",\"wrong\":" << x.wrong << ",\"fallback_chunks\":" << x.fallback_chunks
      << ",\"retransmitted\":" << x.retransmitted << ",\"dropped\":" << x.dropped
      << ",\"background_packets\":" << x.background_packets
      << ",\"formation_us\":" << x.formation_us << ",\"host_busy_us\":" << x.host_busy_us << "}";
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
