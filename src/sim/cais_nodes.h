// CAIS on inca-sim: the nodes of a simulated star (docs/sim.md, "CAIS").
//
// CaisSwitchNode runs the real CaisReducer (the program inca-switchd runs);
// CaisRankNode runs the client's transport core (client::OpCore and
// client::PathState, what the Communicator drives over UDP). Only time and
// the wire are simulated, so the packets these nodes exchange are the bytes
// the real processes would exchange.
//
// ForwarderNode is the switch of the host baselines (host_collectives.h),
// which carry RingHeaders; BackgroundNode is other traffic.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/session_core.h"
#include "client/transport_core.h"
#include "inca/cais/reducer.h"
#include "inca/sim/simulator.h"
#include "membership/group_manager.h"
#include "membership/port_table.h"
#include "net/endpoint.h"
#include "switchd/cais_dispatcher.h"
#include "switchd/control_target.h"

namespace inca::sim {

// Timing mode (docs/sim.md, "CAIS"): each chunk of an operation of `bytes`
// carries one f32 (4 bytes) and is charged on the wire as the chunk of
// `chunk_size` it stands for, so that a 200 MB all-reduce costs the events,
// not the memory, of one. chunk_size 0: byte-exact mode.
// A ReduceScatter or AllGather has one such block per rank: `bytes` is a
// block's and block_chunks its chunks (chunk c is chunk c % block_chunks
// of its block).
struct VirtualChunks {
  uint32_t chunk_size = 0;
  uint64_t bytes = 0;
  uint32_t block_chunks = 0;  // 0: one block (AllReduce)
  // Extra wire bytes for a CAIS datagram with this chunk id and payload.
  uint32_t Extra(uint32_t chunk_id, size_t payload_bytes) const;
};

// What the timing-mode switch charges for a chunk: each operation (or
// piece) registers its VirtualChunks under its sequence number as its
// ranks start it, and the switch looks them up by the header's. Bounded:
// the last kKept sequence numbers.
class VirtualLedger {
 public:
  void Put(uint32_t seq, const VirtualChunks& v);
  // Extra wire bytes for a datagram of operation `seq` (0 if unknown).
  uint32_t Extra(uint32_t seq, uint32_t chunk_id, size_t payload_bytes) const;
  static constexpr size_t kKept = 256;

 private:
  std::deque<std::pair<uint32_t, VirtualChunks>> kept_;
};

// The switch's packet rate (its hardware model beside chunk_size and the
// slot memory): a pipeline that takes one packet every 1/pps, in arrival
// order, with at most queue_packets waiting (more are dropped and counted).
// pps 0: every packet at once, as an ASIC at line rate.
struct SwitchPipeline {
  double pps = 0;
  uint32_t queue_packets = 4096;
};

// A switch node behind such a pipeline; Process() sees each packet as it
// leaves the pipeline.
class PipelinedSwitch : public Node {
 public:
  void Receive(dp::PortId port, Packet packet) final;
  uint64_t pipeline_dropped() const { return pipeline_dropped_; }

 protected:
  PipelinedSwitch(std::string name, SwitchPipeline pipeline)
      : Node(std::move(name)), pipeline_(pipeline) {}
  virtual void Process(dp::PortId port, Packet packet) = 0;

 private:
  void Next();
  SwitchPipeline pipeline_;
  std::deque<std::pair<dp::PortId, Packet>> waiting_;
  bool scheduled_ = false;
  uint64_t pipeline_dropped_ = 0;
};

struct ForwarderRoutes;

// The switch: port p is rank p's link. Chunk timeouts are driven by the
// packets that arrive (Advance before each), as in inca-switchd's loop.
// It is a switchd::ControlTarget too: switchd::SwitchControl over it is
// the control API inca-switchd serves, at the simulated time (the
// aggregation manager installs a fabric's trees through it).
class CaisSwitchNode final : public PipelinedSwitch, public switchd::ControlTarget {
 public:
  // `ledger`: timing mode (nullptr: byte-exact). InvalidArgument when
  // `config` is not a valid reducer configuration or `ranks` is not 1..64.
  static absl::StatusOr<std::unique_ptr<CaisSwitchNode>> Create(
      std::string name, const cais::CaisConfig& config, int ranks,
      std::shared_ptr<const VirtualLedger> ledger = nullptr, SwitchPipeline pipeline = {});
  ~CaisSwitchNode() override;
  const cais::CaisReducer& reducer() const { return *reducer_; }
  // Sees every packet the reducer takes (ingress true) and emits, in order:
  // a trace, as tcpdump on inca-switchd's socket would show it.
  using Trace = std::function<void(bool ingress, dp::PortId port, std::span<const uint8_t>)>;
  void set_trace(Trace trace) { trace_ = std::move(trace); }
  // Packets from ports past the ranks' (background traffic): sent on to
  // their rank, or dropped as malformed.
  uint64_t background_forwarded() const { return background_forwarded_; }
  uint64_t background_malformed() const { return background_malformed_; }

  // Group formation as inca-switchd does it (docs/sim.md, "Group
  // formation"): no rule until ranks JOIN; management datagrams go to
  // inca-switchd's GroupManager, link L standing for the UDP endpoint
  // HostEndpoint(L), and data from a link whose endpoint holds no switch
  // port is dropped (counted in unknown_sender()). The GroupManager's
  // ports are mapped to links both ways. Call before the run starts.
  void FormGroups(uint32_t seq_start, TimeNs lease_ns = membership::kDefaultLeaseNs);
  static net::Endpoint HostEndpoint(int link);
  // In a fabric, the endpoint each link's peer has network-wide (a rank's,
  // a child or parent switch's: what the aggregation manager's topology
  // names), for links [0, peers.size()), in place of HostEndpoint(link);
  // `self` is this switch's. Call before FormGroups.
  void SetPeers(const std::vector<net::Endpoint>& peers, const net::Endpoint& self);
  // In a fabric, where background traffic goes (by destination rank, the
  // fabric's shortest paths), from any port; without, a background packet
  // arrives on a port past the ranks' and leaves on its rank's port.
  void SetRoutes(std::shared_ptr<const ForwarderRoutes> routes) { routes_ = std::move(routes); }

  // switchd::ControlTarget: tasks run at once, at the simulated time.
  void Execute(const std::function<void(Control&)>& fn) override;
  counters::SwitchCounters counters() const override;
  std::string endpoint() const override { return self_.ToString(); }
  const membership::GroupManager* groups() const;
  uint64_t unknown_sender() const;
  uint64_t mgmt_malformed() const;

 private:
  CaisSwitchNode(std::string name, int ranks, std::unique_ptr<cais::CaisReducer> reducer,
                 std::shared_ptr<const VirtualLedger> ledger, SwitchPipeline pipeline);
  // The dispatcher's (switchd/cais_dispatcher.h): the switch's logic is
  // inca-switchd's, this node only moves its datagrams.
  void Process(dp::PortId port, Packet packet) override;
  void ForwardBackground(dp::PortId port, Packet packet);
  // The link behind a switch port (-1: none).
  int LinkOf(dp::PortId port) const;
  class Output;
  int ranks_;
  bool formed_ = false;
  uint64_t background_forwarded_ = 0, background_malformed_ = 0;
  std::unique_ptr<cais::CaisReducer> reducer_;
  std::unique_ptr<membership::PortTable> ports_;
  std::unique_ptr<switchd::CaisDispatcher> dispatcher_;
  std::unique_ptr<Output> output_;
  std::vector<net::Endpoint> endpoint_of_;           // HostEndpoint(link), for each link
  absl::flat_hash_map<net::Endpoint, int> link_of_;  // and back
  std::shared_ptr<const VirtualLedger> ledger_;
  std::shared_ptr<const ForwarderRoutes> routes_;
  Trace trace_;
  switchd::SwitchdConfig config_;  // what the control API reads besides the reducer's
  net::Endpoint self_ = HostEndpoint(0);
};

// What a rank node does between operations: the scenario starts each
// operation on every rank (Begin) and hears when a rank is done.
using RankDone = std::function<void(int rank)>;

// What a rank's loop needs from the simulator that hosts it: inca-sim's
// CaisRankNode, ns-3's CaisRankApp (inca/ns3/cais_apps.h). Times are the
// host simulator's, in ns.
class RankHost {
 public:
  virtual ~RankHost() = default;
  virtual TimeNs Now() = 0;
  // Runs `fn` at `at` (>= Now()).
  virtual void At(TimeNs at, std::function<void()> fn) = 0;
  // One datagram to the switch; extra_wire_bytes: timing mode's charge.
  virtual void SendDatagram(Packet datagram, uint32_t extra_wire_bytes) = 0;
};

// One rank of the switch path: collectives of f32 (sums), one at a time.
// The session (JOIN, layout, epoch, early results) is the client's
// SessionCore and each piece the client's OpCore: this loop only moves
// their datagrams through its host and splits an operation into pieces as
// the Communicator does (client::PieceElements). Written once for every
// simulator that hosts a rank.
class CaisRankLoop {
 public:
  // `virt` (timing mode): the chunk size and the bytes of each operation's
  // block, registered in `ledger` for the switch.
  CaisRankLoop(RankHost* host, int rank, const client::TransportConfig& config, RankDone done,
               VirtualChunks virt = {}, std::shared_ptr<VirtualLedger> ledger = nullptr);
  ~CaisRankLoop();
  // Starts an all-reduce over `data` (reduced in place; kept by the caller
  // until done), in pieces of at most 65,535 chunks with sequence numbers
  // from `seq` on.
  void Begin(uint32_t seq, std::vector<float>* data) {
    Launch(seq, wire::CaisOp::kAllReduce, data, nullptr);
  }
  // Any of the three: kAllReduce of `in` in place (out unused);
  // kReduceScatter of `in` (one block per rank, rank r's at r x out->size())
  // into `out`; kAllGather of `in` into `out` (rank r's block at
  // r x in->size()). Pieces split every block alike, at most 65,535 chunks
  // over all blocks each.
  // InvalidArgument for another collective.
  absl::Status Begin(uint32_t seq, wire::CaisOp op, std::vector<float>* in,
                     std::vector<float>* out);
  // A datagram from the switch.
  void OnDatagram(std::span<const uint8_t> datagram);
  // The operation's result, over all its pieces.
  const client::SwitchPhaseResult& result() const { return total_; }
  uint32_t next_seq() const { return next_seq_; }
  const client::PathState& path() const { return path_; }

  // Joins group `group` of the switch before any operation, as the
  // Communicator's SwitchTransport does (SessionCore: a JOIN, job `job`,
  // any port, every 20 ms until the reply is OK); then the layout comes
  // from its rank_ports and sequence numbers from its seq_base (the first
  // operation's is seq_base + 1, the Communicator's). `joined` hears when.
  // Call before the run starts. `group`: the group id the JOINs name.
  void JoinFirst(uint64_t job, RankDone joined, uint8_t group = 0);
  bool joined() const { return session_.formed(); }
  uint32_t seq_base() const { return session_.seq_base(); }
  uint64_t joins_sent() const { return session_.joins_sent(); }
  // When the run starts: the JOIN, if JoinFirst was called.
  void Start();

 private:
  class Sink;
  void Launch(uint32_t seq, wire::CaisOp op, std::vector<float>* in, std::vector<float>* out);
  void JoinTick();
  void StartPiece();
  void EndPiece();
  void Pump();
  void Arm();  // queues the wake for the core's next deadline
  RankHost* host_;
  bool joining_ = false;
  RankDone on_joined_;
  client::SwitchOp whole_;  // the operation under way
  size_t block_ = 0;        // elements per block (kAllReduce: all of them)
  size_t offset_ = 0;       // the current piece's first element of each block
  uint32_t next_seq_ = 0;
  client::SwitchPhaseResult total_;
  client::SessionCore session_;
  client::PathState path_;
  client::SwitchOp op_;
  client::SwitchPhaseResult result_;
  std::unique_ptr<client::OpCore> core_;
  std::unique_ptr<Sink> sink_;
  RankDone done_;
  VirtualChunks whole_virt_;  // the operation's
  VirtualChunks virt_;        // the current piece's
  std::shared_ptr<VirtualLedger> ledger_;
  TimeNs wake_at_ = -1;
};

// CaisRankLoop on a simulated link (port 0); background traffic that
// reaches the rank is counted and discarded.
class CaisRankNode final : public Node, private RankHost {
 public:
  CaisRankNode(std::string name, int rank, const client::TransportConfig& config, RankDone done,
               VirtualChunks virt = {}, std::shared_ptr<VirtualLedger> ledger = nullptr)
      : Node(std::move(name)),
        loop_(this, rank, config, std::move(done), virt, std::move(ledger)) {}
  void Begin(uint32_t seq, std::vector<float>* data) { loop_.Begin(seq, data); }
  absl::Status Begin(uint32_t seq, wire::CaisOp op, std::vector<float>* in,
                     std::vector<float>* out) {
    return loop_.Begin(seq, op, in, out);
  }
  void Receive(dp::PortId port, Packet packet) override;
  const client::SwitchPhaseResult& result() const { return loop_.result(); }
  uint32_t next_seq() const { return loop_.next_seq(); }
  const client::PathState& path() const { return loop_.path(); }
  uint64_t background() const { return background_; }  // received and discarded
  void JoinFirst(uint64_t job, RankDone joined, uint8_t group = 0) {
    loop_.JoinFirst(job, std::move(joined), group);
  }
  bool joined() const { return loop_.joined(); }
  uint32_t seq_base() const { return loop_.seq_base(); }
  uint64_t joins_sent() const { return loop_.joins_sent(); }
  void Start() override { loop_.Start(); }

 private:
  TimeNs Now() override { return sim().now(); }
  void At(TimeNs at, std::function<void()> fn) override { sim().Schedule(at, std::move(fn)); }
  void SendDatagram(Packet datagram, uint32_t extra) override {
    Send(0, std::move(datagram), extra);
  }
  uint64_t background_ = 0;
  CaisRankLoop loop_;
};

// The ring's wire format, inside the UDP payload (16 bytes, then the
// packet's slice of the block): destination rank, step, packet index within
// the block, and the slice's length in bytes. In timing mode the slice is
// left out and charged on the wire instead.
struct RingHeader {
  uint32_t dst = 0;
  uint32_t step = 0;
  uint32_t index = 0;
  uint32_t bytes = 0;
};
inline constexpr size_t kRingHeaderBytes = 16;
// Writes `h` to the first kRingHeaderBytes of `out`.
void PutRing(const RingHeader& h, uint8_t* out);
// Reads a packet's RingHeader; false if it is too short or its slice's
// length is neither what it carries nor elided (0 carried).
bool GetRing(const Packet& p, RingHeader* h);

// Which of `n` equal-cost next hops a flow takes at a switch: a hash of
// the port it came in by and its destination rank (ECMP by flow hash; the
// closed forms walk the flows with it too).
inline size_t EcmpPick(dp::PortId in, uint32_t dst, size_t n) {
  uint64_t x = (static_cast<uint64_t>(in) << 32 | dst) + 0x9e3779b97f4a7c15ULL;  // splitmix64
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return static_cast<size_t>((x ^ (x >> 31)) % n);
}

// A forwarder's routes in a fabric: for each destination rank, the ports
// toward it, equal-cost; a packet takes EcmpPick(its ingress port, its
// destination) of them, so that one flow keeps one path. Ranks share
// port sets (every rank behind one leaf is reached alike), so a switch
// holds one small index per rank.
struct ForwarderRoutes {
  std::vector<std::vector<dp::PortId>> sets;
  std::vector<uint32_t> set_of_rank;  // rank r's ports: sets[set_of_rank[r]]
  // Whether `dst` has a route here.
  bool Has(uint32_t dst) const {
    return dst < set_of_rank.size() && !sets[set_of_rank[dst]].empty();
  }
  // The port a packet to `dst` (Has) that came in on `in` leaves by.
  dp::PortId Pick(dp::PortId in, uint32_t dst) const {
    const std::vector<dp::PortId>& hops = sets[set_of_rank[dst]];
    return hops[hops.size() == 1 ? 0 : EcmpPick(in, dst, hops.size())];
  }
};

// The switch as a plain forwarder: a ring packet goes out of the port of
// its destination rank (with its elided slice charged again).
class ForwarderNode final : public PipelinedSwitch {
 public:
  explicit ForwarderNode(std::string name, SwitchPipeline pipeline = {})
      : PipelinedSwitch(std::move(name), pipeline) {}
  uint64_t forwarded() const { return forwarded_; }
  uint64_t dropped() const { return dropped_; }  // malformed or to no port
  // In a fabric, its routes (shared with the closed forms' flow walk);
  // none: port = rank.
  void SetRoutes(std::shared_ptr<const ForwarderRoutes> routes) { routes_ = std::move(routes); }

 private:
  void Process(dp::PortId port, Packet packet) override;
  std::shared_ptr<const ForwarderRoutes> routes_;
  uint64_t forwarded_ = 0;
  uint64_t dropped_ = 0;
};

// Other traffic through the switch (docs/sim.md, "Background traffic"):
// flows of `flow_bytes` to a rank chosen at random, arriving as a Poisson
// process so that every rank's downlink carries `load` of its rate on
// average, each flow sent at `flow_bps` (0: the host link's rate). Its
// packets are RingHeaders with step kBackgroundStep and the payload elided
// (charged on the wire); the switches send them toward the rank and the
// rank counts and discards them. On a fabric each edge switch has a source
// of its own, sending `share` of the whole (its hosts' part) to ranks
// anywhere in the fabric.
struct BackgroundTraffic {
  double load = 0;
  uint64_t flow_bytes = uint64_t{4} << 20;
  double flow_bps = 0;
  double share = 1;
};
inline constexpr uint32_t kBackgroundStep = 0xFFFFFFFF;
// True for a background packet (16 bytes, step kBackgroundStep).
bool IsBackground(const Packet& packet);

class BackgroundNode final : public Node {
 public:
  // `link_bps`: a host link's rate; `payload`: bytes per packet (elided).
  // InvalidArgument without ranks, a payload of at least 4 bytes or a flow
  // size.
  static absl::StatusOr<std::unique_ptr<BackgroundNode>> Create(
      std::string name, int ranks, double link_bps, BackgroundTraffic traffic, uint32_t payload,
      uint32_t overhead_bytes, uint64_t seed);
  void Start() override;
  void Receive(dp::PortId, Packet) override {}  // nothing is sent back to it
  uint64_t flows() const { return flows_; }
  uint64_t packets() const { return packets_; }

 private:
  BackgroundNode(std::string name, int ranks, double link_bps, BackgroundTraffic traffic,
                 uint32_t payload, uint32_t overhead_bytes, uint64_t seed);
  void Arrive();
  void SendFlow(uint32_t dst, uint64_t left);
  int ranks_;
  double flow_bps_, flows_per_s_;
  BackgroundTraffic traffic_;
  uint32_t payload_, overhead_;
  std::mt19937_64 rng_;
  uint64_t flows_ = 0, packets_ = 0;
};

}  // namespace inca::sim
