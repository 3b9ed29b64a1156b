// The control API of an inca switch: C++ interfaces returning status values.
// ControlPlane holds what every program serves; CaisControlPlane and
// OlafControlPlane are the programs' facets (ControlPlane::cais()/olaf()).
// The gRPC service (proto/inca/control/v1/control.proto), cais-cli, olaf-cli
// and the dashboard are thin adapters over them; ConnectControl's
// ControlClient implements all three over gRPC, so tools drive a local or a
// remote switch the same way.
//
// Thread-safety: implementations are safe to call from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "inca/cais/rule_table.h"
#include "inca/control/stats.h"

namespace inca::control {

struct PortInfo {
  uint16_t port = 0;
  std::string endpoint;  // "ip:port"
  bool is_static = false;
};

// What the hosts of a group measured for one size class of operations
// (sizes in [2^bin, 2^(bin+1)) bytes) on one path: REPORT datagrams,
// docs/protocol.md. Moving averages; age_ms of the last sample, -1: none.
struct PathTiming {
  uint64_t samples = 0;
  double mean_us = 0;
  double mean_bytes = 0;
  int64_t age_ms = -1;
  // The least time per byte among the last 4 samples (what the offload
  // controller compares; 0 when unmeasured).
  double best_us_per_byte = 0;
  bool measured() const { return samples > 0; }
};
struct OffloadTiming {
  int bin = 0;
  PathTiming switch_path;
  PathTiming host_path;
};

// A rank that JOINed this switch: what the aggregation manager reads to
// learn where each rank of a group sits (docs/design/tree.md).
struct GroupMemberInfo {
  uint16_t rank = 0;
  uint16_t port = 0;
  std::string endpoint;  // its source, "ip:port"
};

struct GroupInfo {
  uint8_t group_id = 0;
  uint16_t world_size = 0;
  std::vector<uint16_t> rank_ports;  // in rank order
  bool formed = false;
  // Formed: the group's. Forming: the seq_base the switch would give a group
  // formed now (the aggregation manager picks a tree's above every switch's).
  uint32_t seq_base = 0;
  uint64_t job = 0;                      // the job of the JOIN that created it (0: control)
  std::vector<GroupMemberInfo> members;  // JOIN groups: the ranks joined here, by rank
  // A group of a tree of switches (InstallTree): its member ports (ranks'
  // and child switches') and the port toward the parent (absent at a root).
  bool tree = false;
  std::vector<uint16_t> tree_members;
  std::optional<uint16_t> uplink;
  std::string source;                  // "join" (formed by hosts) or "control" (created here)
  std::vector<OffloadTiming> timings;  // size classes with samples, by bin
  // Another group sent data from one of this group's hosts in the last
  // second: the offload controller does not explore then, and the switch
  // keeps such operations' REPORTs out of `timings`.
  bool contended = false;
  // The window its members are advised now (JOIN_REPLY, PONG): the
  // switch's fair share of its slots among the groups here, capped by the
  // tree's (docs/protocol.md, "Window advice"). 0 from a program that
  // advises none.
  uint16_t window_chunks = 0;
};

// The offload decision for one group, as applied by the switch.
struct GroupOffload {
  uint8_t group_id = 0;
  int participants = 0;
  uint64_t min_bytes = 0;           // operations of min_bytes..max_bytes go to the switch;
  uint64_t max_bytes = UINT64_MAX;  // min > max: none do
  // Size classes decided from measurements (bit b: sizes in [2^b, 2^(b+1))):
  // for these, offload_bins says switch (1) or host (0) and the range above
  // does not apply.
  uint64_t measured_bins = 0;
  uint64_t offload_bins = 0;
  // One-shot: the next operation of each such class takes the other path, so
  // that path's time is measured again. Applied once when the policy is set.
  uint64_t explore_bins = 0;
  // Of measured_bins, those short of samples on a path and decided with a
  // nearby class's (docs/control.md, "Measured decisions", item 5).
  uint64_t borrowed_bins = 0;
  // The group's fallback ratio over the controller's window, and whether it
  // is held on the host path for it (docs/control.md, "Fallback hold").
  double fallback_ratio = 0;
  bool fallback_hold = false;
};

// What an offload controller decided, and from which figures (CAIS 3.3/4.4).
struct OffloadPolicy {
  std::string controller;  // who set it: "embedded", or an external controller's name
  double threshold = 0;
  bool fallback_alarm = false;
  double fallback_ratio = 0;  // switch-wide, over the controller's window (10 s)
  double queue_delay_us = 0;
  double port_utilisation = 0;
  double sram_usage = 0;
  std::vector<GroupOffload> groups;
  int64_t updated_unix_ms = 0;  // set by the switch when applied; 0: never
};

// OLAF (OLAF paper, arXiv 2507.05876, 5.2): the cluster_mapping table, keyed
// by the worker's UDP source port.
struct ClusterMapping {
  uint16_t src_port = 0;
  uint16_t cluster_id = 0;
};

// What the aggregation manager installs for one group at one switch of its
// tree (docs/design/tree.md, "The aggregation manager"). The ranks that
// JOINed this switch keep their ports; child switches' ports and the uplink
// must be bound (RegisterPort) first.
struct TreeInstall {
  uint8_t group_id = 0;
  uint64_t job = 0;
  uint16_t world_size = 0;
  uint32_t seq_base = 0;             // one for the whole tree
  std::vector<uint16_t> members;     // ranks' and child switches' ports
  std::optional<uint16_t> uplink;    // toward the parent; absent at the root
  std::vector<uint16_t> rank_ports;  // world_size entries: each rank's port here, or
                                     // the member or uplink port leading to it
  // The least fair share (chunks) of the switches of the tree, which caps
  // the window this switch advises the group's ranks. 0: no cap.
  uint16_t window_chunks = 0;
};

class CaisControlPlane;
class OlafControlPlane;

// The calls every switch program serves, and its program's facet.
//
// Configuration keys (GetConfig/SetConfig) of the CAIS program, the
// write-up's names: timeout_ms, result_hold_ms, max_pending_chunks,
// sram_usage_limit, group_share, offload_threshold, lease_ms -- changeable at
// run time; chunk_size, sram_bytes, deterministic, controller_port --
// read-only (they size memory or sockets; restart the switch to change
// them). docs/settings.md lists them; the OLAF program's are in olaf_control.h.
class ControlPlane {
 public:
  virtual ~ControlPlane() = default;

  // "cais", "olaf" or "fifo" for a switch's own plane; "remote" for a client.
  virtual std::string program() const = 0;
  // The program's own calls: non-null when this plane serves them. A client
  // (ConnectControl) has both; the switch answers FailedPrecondition for the
  // program it does not run.
  virtual CaisControlPlane* cais() { return nullptr; }
  virtual OlafControlPlane* olaf() { return nullptr; }

  virtual absl::StatusOr<std::vector<PortInfo>> ListPorts() = 0;
  // Unbinds a port, static or dynamic. CAIS: every JOIN-formed or forming
  // group with a member on it is dissolved first; returns how many. OLAF:
  // the port's worker or PS binding is forgotten; returns 0. NotFound for
  // an unbound port. The default answers FailedPrecondition.
  virtual absl::StatusOr<int> ReleasePort(uint16_t port);

  virtual absl::StatusOr<std::map<std::string, std::string>> GetConfig() = 0;
  // All-or-nothing: every key is validated before any is applied.
  virtual absl::Status SetConfig(const std::map<std::string, std::string>& values) = 0;

  // The front end's figures (the OLAF program fills packets and drops).
  virtual absl::StatusOr<Stats> GetStats() = 0;
  virtual absl::Status Health() = 0;
};

// The CAIS program's facet: rules, static ports, groups and offload policy.
class CaisControlPlane {
 public:
  virtual ~CaisControlPlane() = default;

  virtual absl::Status AddRule(const cais::Rule& rule) = 0;
  virtual absl::Status DeleteRule(const cais::RuleKey& key) = 0;
  virtual absl::StatusOr<std::vector<cais::Rule>> DumpRules() = 0;

  // Binds a switch port to a host endpoint ("ip:port") statically.
  virtual absl::Status RegisterPort(uint16_t port, const std::string& endpoint) = 0;

  // Installs the rule (group, *, *) over `ports` for every op.
  virtual absl::StatusOr<GroupInfo> CreateGroup(uint8_t group_id,
                                                const std::vector<uint16_t>& ports) = 0;
  virtual absl::Status DestroyGroup(uint8_t group_id) = 0;
  virtual absl::StatusOr<std::vector<GroupInfo>> ListGroups() = 0;
  // Forms a group of a tree of switches here (the aggregation manager's
  // call): the ranks JOINed here (same job and world size) and the child
  // switches reduce into one rule with the uplink; their JOINs are answered
  // OK with `rank_ports` and `seq_base`. FailedPrecondition when the group
  // is static, formed, another job's, a JOINed rank is not given its port,
  // a port is unbound, or the switch is sharded (--threads); InvalidArgument
  // for a malformed request. The default answers Unimplemented.
  virtual absl::StatusOr<GroupInfo> InstallTree(const TreeInstall& install);

  // Applies an offload controller's decisions: each listed group's size
  // range (groups not listed keep theirs; a group that has not formed yet
  // gets it when it does). InvalidArgument when a group is listed twice.
  virtual absl::Status SetOffloadPolicy(const OffloadPolicy& policy) = 0;
  // The policy last applied (updated_unix_ms 0 when none was).
  virtual absl::StatusOr<OffloadPolicy> GetOffloadPolicy() = 0;
};

// The OLAF program's facet (OLAF and FIFO queues).
class OlafControlPlane {
 public:
  virtual ~OlafControlPlane() = default;

  // InvalidArgument for cluster 0xFFFF, ResourceExhausted when the table is full.
  virtual absl::Status SetClusterMapping(uint16_t src_port, uint16_t cluster_id) = 0;
  virtual absl::Status DeleteClusterMapping(uint16_t src_port) = 0;  // NotFound if absent
  virtual absl::StatusOr<std::vector<ClusterMapping>> ListClusterMappings() = 0;
  virtual absl::StatusOr<OlafStats> GetOlafStats() = 0;
};

// What ConnectControl returns: every call of every program, over gRPC.
class ControlClient : public ControlPlane, public CaisControlPlane, public OlafControlPlane {
 public:
  CaisControlPlane* cais() override { return this; }
  OlafControlPlane* olaf() override { return this; }
};

// The FailedPrecondition a switch gives for calls its program does not serve.
absl::Status WrongProgram(std::string_view running, std::string_view needed);

// The one rule for a control-API bearer token, wherever it enters (a flag,
// INCA_TOKEN, a client's argument, the Python cais.init(token=...)): every
// byte printable ASCII, 0x20..0x7E, as gRPC requires of a metadata value
// (anything else, a trailing newline from a file included, made gRPC abort
// the process). Empty means no token and is fine. InvalidArgument naming
// `where` and the first bad byte (position and hex value), never the token.
absl::Status ValidateControlToken(std::string_view token, std::string_view where = "token");

// A ControlPlane that talks to a switch's gRPC control service at `target`
// ("host:port"). `token` is sent as a bearer token when non-empty; one that
// ValidateControlToken refuses is InvalidArgument here.
absl::StatusOr<std::unique_ptr<ControlClient>> ConnectControl(const std::string& target,
                                                              const std::string& token,
                                                              int timeout_ms = 3000);

}  // namespace inca::control
