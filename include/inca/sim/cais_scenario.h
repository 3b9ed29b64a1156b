// CAIS scenarios for inca-sim: all-reduces on a simulated star of hosts,
// through the real CaisReducer with the client's real transport core, and
// the same all-reduces as a packet-level ring (NCCL's and Gloo's
// algorithm) over the same links. Keys and outputs: docs/sim.md, "CAIS".
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "inca/dataplane/drop_reason.h"
#include "inca/sim/simulator.h"

namespace inca::sim {

struct CaisSimScenario {
  std::string name = "cais";
  uint64_t seed = 1;
  std::vector<std::string> backends = {"inca", "ring"};
  // exact: every datagram carries its payload and results are checked.
  // timing: a chunk carries one f32 and is charged on the wire as the
  // chunk it stands for (the ring carries none), so large operations cost
  // events, not memory; inca's per-chunk sums are still checked.
  std::string mode = "exact";
  int hosts = 4;
  // Switches the hosts stripe over (multi-rail: every host has a link of
  // link_gbps to each, and every operation's tensor is cut into that many
  // stripes, stripe p over switch p, on every backend).
  int switches = 1;
  // A leaf-spine fabric (docs/sim.md, "Fabrics"): the hosts in `racks`
  // racks of hosts / racks each, rack k's hosts on leaf switch k, every
  // leaf linked to each of `spines` spines at uplink_gbps (0: link_gbps;
  // below hosts / racks x link_gbps in all the uplinks are
  // oversubscribed), the host baselines' flows spread over the spines by
  // ECMP (a hash of ingress port and destination). inca's ranks
  // JOIN their leaf and the aggregation manager (inca-controller
  // --topology's, over each switch's control API) builds the group's tree;
  // the ring's packets cross the spine between racks. 0: the star.
  int racks = 0;
  int spines = 1;
  // A three-tier k-ary fat-tree (docs/sim.md, "Fabrics") in place of the
  // leaf-spine: pods of k/2 edge and k/2 aggregation switches, (k/2)^2
  // cores, k/2 hosts on each edge switch (hosts a multiple of k/2, at most
  // k^3/4: only the pods that hold hosts are built), every link between
  // switches at uplink_gbps, the baselines' flows spread by ECMP at the
  // edge and the aggregation tier alike. 0: none.
  int fat_tree_k = 0;
  double uplink_gbps = 0;
  // Which host each rank runs on in a fabric: "rack" (rank r on host r,
  // racks in order) or "random" (a shuffle drawn from the seed, as a
  // scheduler places ranks). The tree's cost does not depend on it; the
  // ring's uplink crossings do.
  std::string placement = "rack";
  // Host of each rank under `placement` (a fabric's racks hold hosts
  // [k x hosts/racks, (k+1) x hosts/racks)).
  std::vector<int> HostOfRank() const;
  // A leaf-spine or a fat-tree.
  bool IsFabric() const { return racks > 0 || fat_tree_k > 0; }
  // The most ring edges (rank r to r + 1) on one uplink in one direction
  // under `placement` and ECMP: 1 in rack order over one spine; 0 on a
  // star.
  int RingCrossings() const;
  double link_gbps = 100;  // every host link, both ways
  double link_delay_us = 1;
  uint32_t queue_packets = 1024;  // per link direction
  double loss = 0;                // per packet, every link direction
  uint32_t mtu = 9000;
  uint32_t overhead_bytes = 66;  // Ethernet (with preamble and gap) + IPv4 + UDP
  uint32_t chunk_size = 8952;    // payload bytes per packet through the switch (inca)
  // Payload bytes per packet of the host baselines (ring, tree): 0 is
  // chunk_size. A hardware switch carries a few hundred bytes per packet
  // (SwitchML: 256) while the hosts' own collectives keep full frames.
  uint32_t host_payload = 0;
  uint32_t HostPayload() const { return host_payload != 0 ? host_payload : chunk_size; }
  // Several jobs at once (docs/sim.md, "Several jobs"): the ranks split
  // into `jobs` jobs of hosts / jobs ranks each (global ranks [j x m,
  // (j+1) x m) are job j's; `placement` puts them on hosts), every job its
  // own group (inca: its own JOINs and tree, the switches' pending capacity
  // shared by switch_group_share) or its own ring or tree, all running
  // every operation at once. An operation ends when every job's has; rows
  // give each job's mean. All-reduce only.
  int jobs = 1;
  int JobRanks() const { return hosts / std::max(1, jobs); }
  // On a fabric, the most jobs' trees sharing one link between switches
  // (a job's tree as the manager builds it: every switch from its ranks'
  // edge switches up to their lowest common ancestor); 0 on a star or
  // where every job sits behind one edge switch.
  int MostTreesOnALink() const;
  // The hosts' CPUs (docs/sim.md, "Host model"): each packet a rank sends
  // or receives costs host_packet_ns + bytes x host_byte_ps / 1000 of one
  // of host_cores cores, for every backend. 0 and 0: free.
  double host_packet_ns = 0;
  double host_byte_ps = 0;
  int host_cores = 1;
  // allreduce, reduce_scatter or all_gather (the tree: allreduce only).
  // A size is the whole tensor's in each: a reduce-scatter leaves 1/hosts
  // of it per rank, an all-gather gathers 1/hosts from each.
  std::string collective = "allreduce";
  std::vector<uint64_t> sizes = {uint64_t{1} << 20};  // bytes per operation (f32)
  int ops = 3;                                        // per size, back to back
  // inca's client: the congestion window's cap, in chunks (the default of
  // CommunicatorOptions::max_pending_chunks), and the floor of its delay
  // target's slack (-1: the transport's default, 300 us).
  uint32_t window = 64;
  double target_floor_us = -1;
  // inca's ranks form their group by JOINing the switch (inca-switchd's
  // GroupManager) before the first operation; false: the group is
  // installed as a static rule.
  bool form_groups = true;
  // The switch: slots and slot memory (CaisConfig), and its pipeline's
  // packet rate (0: line rate, as an ASIC) with the packets that may wait
  // for it. Payload per packet is chunk_size. A rate applies to the ring's
  // forwarding too: it is the same switch.
  uint32_t switch_slots = 128;
  double switch_sram_mib = 16;
  double switch_mpps = 0;
  uint32_t switch_queue_packets = 4096;
  // Each group's share of a switch's pending capacity (CaisConfig::
  // group_share): what several jobs on one switch are each guaranteed.
  double switch_group_share = 0.5;
  // The reducer's advise_window: JOIN replies advise each group's ranks a
  // window of its fair share of the slots, which the ranks keep to.
  bool switch_advise_window = true;
  // The ring: each step's software cost α (the closed form's per-step
  // latency), added when a packet is ready to go on to the next rank.
  double ring_step_latency_us = 0;
  // Background traffic (docs/sim.md, "Background traffic"): flows of
  // background_flow_bytes to random ranks, Poisson arrivals, that load each
  // rank's downlink by background_load of its rate on average, each flow
  // sent at background_gbps (0: link_gbps). 0: none.
  double background_load = 0;
  uint64_t background_flow_bytes = uint64_t{4} << 20;
  double background_gbps = 0;
  // Each simulation stops with an error after this many events (docs/sim.md).
  uint64_t max_events = kDefaultMaxEvents;
  // Optional sweep: the scenario runs once per value of this key.
  std::string sweep_key;
  std::vector<std::string> sweep_values;
  absl::Status Validate() const;
  absl::Status ValidateFabric() const;  // racks, spines, fat_tree_k, uplink_gbps, placement
  absl::Status ValidateJobs() const;
  double UplinkGbps() const { return uplink_gbps > 0 ? uplink_gbps : link_gbps; }
};

// Parses YAML; unknown keys and bad values are InvalidArgument naming the key.
absl::StatusOr<CaisSimScenario> ParseCaisSimScenario(std::string_view yaml,
                                                     std::string_view source);
// Sets one key ("link_gbps=200", "sizes=1M,16M") as the YAML would.
absl::Status ApplyCaisOverride(std::string_view key_value, CaisSimScenario* s,
                               bool validate = true);
// True if the YAML text is a CAIS scenario (`system: cais`).
bool IsCaisScenario(std::string_view yaml);

struct CaisSimRow {
  std::string backend;  // inca | ring | tree
  uint64_t bytes = 0;
  int ops = 0;
  double mean_us = 0, min_us = 0, max_us = 0;
  // The backend's closed form on these links: inca, a switch that reduces
  // at line rate (every chunk up once and down once, pipelined); the ring,
  // pipelined packet by packet: 2(n-1)/n of the wire bytes per link, and
  // the 2(n-1) step latencies only where a block is shorter than a hop.
  double closed_form_us = 0;
  double of_closed_form = 0;  // closed_form_us / mean_us
  uint64_t checked = 0;       // elements per rank checked against the exact sum
  uint64_t wrong = 0;         // of those, over all ranks and operations, the ones that differ
  // inca: chunks (over all ranks and operations) the switch path left to
  // the host path (the switch handed them back, or the rank gave up on
  // them). A real rank finishes them on the host collective, which the
  // simulator does not run: they are neither checked nor timed.
  uint64_t fallback_chunks = 0;
  uint64_t retransmitted = 0;  // inca: chunks sent again
  uint64_t dropped = 0;  // packets the links (queue, loss, mtu) and the switch's pipeline dropped
  uint64_t background_packets = 0;  // background packets sent (all flows), all operations
  std::vector<double> op_us;        // each operation's time, in order
  // inca with form_groups: from the start until every rank's JOIN was
  // answered OK (the operations are timed from then on).
  double formation_us = 0;
  // The busiest rank's CPU time (host model), per operation.
  double host_busy_us = 0;
  // With several jobs: each job's mean time, from the operation's start
  // until its last rank finished (mean_us is the slowest job's).
  std::vector<double> job_mean_us;
  // inca: what its switches' reducers dropped, by reason (dp::DropReason),
  // over all operations (the JSON names the non-zero ones).
  std::array<uint64_t, dp::kDropReasonCount> switch_drops{};
};

struct CaisSimResult {
  std::vector<CaisSimRow> rows;
  uint64_t events = 0;
  double wall_s = 0;
};

using Progress = std::function<void(double fraction)>;
// Runs every backend on every size. Deterministic: the same scenario gives
// the same result (less wall_s).
absl::StatusOr<CaisSimResult> RunCaisSimScenario(const CaisSimScenario& s,
                                                 const Progress& progress = {});

// The closed forms (seconds), on links of `rate_bps` with `overhead` bytes
// of framing per packet and `delay_s` each way.
double SwitchAllReduceSeconds(int hosts, uint64_t bytes, uint32_t chunk, double rate_bps,
                              uint32_t overhead, double delay_s);
// The switch's reduce-scatter (every rank's uplink carries the whole
// tensor, `bytes`) and all-gather (every rank's downlink carries all
// blocks, its own included): each block of bytes / hosts in its own chunks.
double SwitchReduceScatterSeconds(int hosts, uint64_t bytes, uint32_t chunk, double rate_bps,
                                  uint32_t overhead, double delay_s);
double SwitchAllGatherSeconds(int hosts, uint64_t bytes, uint32_t chunk, double rate_bps,
                              uint32_t overhead, double delay_s);
double RingAllReduceSeconds(int hosts, uint64_t bytes, uint32_t payload, double rate_bps,
                            uint32_t overhead, double delay_s, double step_latency_s);
// The ring's reduce-scatter or all-gather alone: n-1 steps instead of 2(n-1).
double RingHalfSeconds(int hosts, uint64_t bytes, uint32_t payload, double rate_bps,
                       uint32_t overhead, double delay_s, double step_latency_s);
// NCCL's double binary tree, pipelined packet by packet: the larger of the
// busiest link's packets and the deeper tree's climb and descent.
double TreeAllReduceSeconds(int hosts, uint64_t bytes, uint32_t payload, double rate_bps,
                            uint32_t overhead, double delay_s, double step_latency_s);

std::string CaisResultJson(const CaisSimScenario& s, const CaisSimResult& r);
// {"reason": count, ...} of the non-zero ones, for the results' JSON.
std::string SwitchDropsJson(const std::array<uint64_t, dp::kDropReasonCount>& drops);
std::string CaisResultCsv(const CaisSimResult& r);

}  // namespace inca::sim
