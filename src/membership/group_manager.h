// Group membership for inca-switchd: answers the management datagrams of
// include/inca/wire/mgmt.h (JOIN, PING, LEAVE) and keeps the port table and
// the reducer's rule table in step with the groups hosts form.
//
// Pure logic: no sockets, no clock (time is passed in), no randomness (the
// first seq_base is passed in). Not thread-safe: the switch's I/O thread
// owns it, like the reducer whose RuleTable it edits.
//
// JOIN (group, rank, world_size, requested port), checked in this order:
//   bad_request          world_size 0 or > 4,096 (kMaxTreeRanks), rank >=
//                        world_size, requested port >= 1,024 (other than kAnyPort), the endpoint
//                        already holds another rank of this group, or 64 (kMaxGroupMembers) of
//                        its ranks joined here already
//   group_conflict       a static rule (configuration) names this group
//   group_busy           another job holds the group and a member of it was
//                        heard from within half a lease (else the JOIN
//                        replaces that group; see Jobs below)
//   world_size_mismatch  the group is forming/formed with another world_size
//   rank_taken           another endpoint holds this rank
//   source_limit         the JOIN would create a group while its source
//                        address already has kMaxFormingPerSource forming
//   no_free_port         the endpoint has no port, all 1,024 are bound, and no
//                        port can be reclaimed (see Floods below)
// A group of more than 64 ranks never forms at one switch: it waits for the
// aggregation manager's InstallTree, like any group whose ranks JOINed
// several switches (docs/design/tree.md).
// Otherwise the endpoint is a member with a port (the one it holds, e.g.
// static or from another group; else the requested port if free; else the
// lowest free). While ranks are missing the reply is PENDING (with the port);
// the JOIN that completes the group installs
//   Rule{RuleKey{group, *, *}, ports, ports, op = any}
// picks the group's seq_base and replies OK with rank_ports (each rank's
// port, in rank order) and seq_base. A repeated JOIN from a member gets the
// current answer again (PENDING or the same OK): JOIN is idempotent.
//
// seq_base: a counter that starts at the constructor's `seq_start` (the
// switch passes a random value) and advances by kSeqBaseStride per group
// formation, so a re-formed group never reuses recent sequence numbers.
//
// LEAVE from a member: a formed group is dissolved (rule deleted, every
// member dropped; the others learn it from PONG unknown and must re-JOIN);
// a forming group just loses that member. LEAVE_REPLY ok, or unknown for a
// non-member. PING from a member: PONG ok; otherwise PONG unknown. A member
// is identified by (group, rank, source endpoint). Replies echo nonce,
// group and rank. Dynamic ports are released once their endpoint is in no
// group; static ports never are.
//
// Leases (issue 18). Every member holds its place for `lease` after it was
// last heard from: a JOIN, PING or REPORT, or CAIS data on its port
// (SeenOnPort). Hosts PING every lease / 4 while idle (the lease is in every
// JOIN_REPLY and PONG), so a job idle for any number of lease periods (a
// checkpoint, an evaluation) keeps its group. Expire() drops
//   - a forming group none of whose members was heard from for a lease
//     (counted in groups_expired(); waiting members re-send JOIN every 20 ms,
//     so only a job that crashed or gave up goes silent), and
//   - a formed group any of whose members was silent for a lease (counted in
//     leases_expired(): the group cannot reduce without it; the others learn
//     it from PONG unknown and re-JOIN when they next use the switch).
// Their ports are released and their group id is free again.
//
// Jobs: a JOIN names its job (wire::MgmtMessage::job, one random value per
// run). A JOIN for a group held by another job replaces that group when all
// of its members have been silent for half a lease (a re-run after a crash:
// counted in groups_replaced()); while any is alive it is refused with
// group_busy. An operator can Destroy() any group, JOIN-formed included
// (counted in groups_destroyed()); a live job re-forms it at its next JOIN.
//
// Floods (issue 18: JOINs from 300 source ports kept every port and group
// id forever). A source address may have at most kMaxFormingPerSource
// groups forming at once (a JOIN that would create another is refused with
// source_limit). When a JOIN needs a port and none is free, the switch
// reclaims one held only by forming groups: from the source address holding
// the most such ports, the one that joined earliest, never a member of the
// group being joined. Its memberships end and the port is released
// (ports_reclaimed()). Ports in formed groups and static ports are never
// reclaimed, so a flood that keeps re-sending JOINs cannot keep a job out:
// the job's JOINs take the flood's ports as they come.
//
// REPORT from a member of a formed group (no reply): one operation's size,
// duration and path, measured by that host. The manager keeps, per group
// and per size class (bin b holds sizes in [2^b, 2^(b+1))), a moving average
// of the duration and size on each path and the time of the last sample:
// what the offload controller judges from (control::OffloadTiming). REPORTs
// from non-members, forming groups or of size 0 are ignored and counted.
//
// Contended samples. A REPORT whose operation ran while another formed
// group sent data from one of this group's hosts (a member endpoint with the
// same address, so the same host link, or on loopback the same CPUs) is
// counted (reports_contended) but kept out of the averages: the two paths
// are then measured against different neighbours. Two inca jobs sharing
// hosts showed why (docs/control.md, "Contended samples"): one job's Gloo
// explore, TCP, takes most of the links from the other job's delay-based
// switch traffic, so the host path looked faster than the switch path it
// had just slowed down, and both jobs moved to Gloo at 0.34 of the link each
// instead of 0.49 on the switch. Contended() says whether a group shares
// its hosts with another active group now, so that the controller does not
// explore while it does.
#pragma once

#include <algorithm>
#include <array>
#include <bitset>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "inca/cais/rule_table.h"
#include "inca/dataplane/program.h"
#include "inca/util/event_log.h"
#include "inca/wire/mgmt.h"
#include "membership/port_table.h"
#include "net/endpoint.h"

namespace inca::membership {

inline constexpr uint32_t kSeqBaseStride = uint32_t{1} << 20;
inline constexpr dp::TimeNs kDefaultLeaseNs = 10'000 * dp::kNsPerMs;
inline constexpr size_t kMaxFormingPerSource = 16;
// The lease's bounds (--lease-ms, YAML lease_ms, control key lease_ms).
inline constexpr uint32_t kMinLeaseMs = 100;
inline constexpr uint32_t kMaxLeaseMs = 3'600'000;

struct GroupMember {
  net::Endpoint endpoint;
  dp::PortId port = 0;
  dp::TimeNs joined_at = 0;
  dp::TimeNs last_seen = 0;  // last JOIN, PING or REPORT (data: SeenOnPort)
};

// Moving averages of what hosts measured on one path, for one size class.
struct PathAverage {
  uint64_t samples = 0;
  double mean_us = 0;
  double mean_bytes = 0;
  dp::TimeNs last = 0;  // time of the last sample
  // Time per byte of the last kRecentSamples samples (a ring): their least
  // is what the offload controller compares, so that one operation slowed
  // by another job's burst does not decide a class for long.
  std::array<double, 4> recent_us_per_byte{};
  double BestUsPerByte() const;
};
inline constexpr double kTimingWeight = 0.25;  // weight of a new sample

using GroupTimings = std::array<std::array<PathAverage, 2>, wire::kSizeClasses>;

// What the hosts measured outlives the job (issue 46): a job's timings are
// kept, when its group dissolves, under the group's shape (world size and
// its members' host addresses), and a later group of the same shape starts
// from them, so that short jobs on the same hosts do not each explore every
// size again, and a decision does not flip from one job to the next. At most
// kTimingShapes shapes, the least recently used given up first.
inline constexpr size_t kTimingShapes = 64;
struct GroupShape {
  uint16_t world_size = 0;
  std::vector<std::array<uint8_t, 16>> hosts;  // members' addresses, sorted
  friend auto operator<=>(const GroupShape&, const GroupShape&) = default;
};

struct GroupState {
  uint8_t group_id = 0;
  uint16_t world_size = 0;
  uint64_t job = 0;                               // the job of the JOIN that created it
  std::vector<std::optional<GroupMember>> ranks;  // world_size entries
  uint16_t joined = 0;                            // ranks present
  bool formed = false;                            // all ranks joined, rule installed
  uint32_t seq_base = 0;                          // valid when formed
  dp::TimeNs formed_at = 0;
  // Per size class: [0] the switch path, [1] the host path (wire::ReportPath).
  // Seeded at formation from the last group of the same shape (below).
  std::array<std::array<PathAverage, 2>, wire::kSizeClasses> timings{};

  // A group of a tree of switches (InstallTree): the member ports (its
  // ranks' and its child switches'), and each rank's port for the JOIN
  // replies (a rank elsewhere: the member or uplink leading to it).
  bool tree = false;
  std::vector<dp::PortId> tree_members;
  std::vector<uint16_t> tree_rank_ports;
  std::optional<dp::PortId> tree_uplink;
  // The tree's window cap from the aggregation manager (TreeGroup): the
  // least fair share of the switches above this one. 0: none.
  uint16_t tree_window = 0;

  // Port of each rank in rank order (formed groups).
  std::vector<uint16_t> rank_ports() const;
};

// What the aggregation manager installs for one group at one switch of its
// tree (docs/design/tree.md, "The aggregation manager").
struct TreeGroup {
  uint8_t group_id = 0;
  uint64_t job = 0;
  uint16_t world_size = 0;
  uint32_t seq_base = 0;
  std::vector<dp::PortId> members;   // the JOINed ranks' ports and the children's (bound)
  std::optional<dp::PortId> uplink;  // bound to the parent; absent at the root
  std::vector<uint16_t> rank_ports;  // world_size entries, for the JOIN replies
  // The most chunks each rank should keep in flight so that the tree's
  // groups fit every switch above this one (the manager's least fair share
  // along the tree); the ranks' window advice is at most this. 0: no cap.
  uint16_t window_chunks = 0;
};

class GroupManager {
 public:
  // `ports`, `rules` and `log` must outlive the manager. Its events
  // (member_joined, group_formed, lease_expired, ...) go to `log`
  // (nullptr: kept nowhere).
  GroupManager(PortTable* ports, cais::RuleTable* rules, uint32_t seq_start,
               dp::TimeNs lease = kDefaultLeaseNs, EventLog* log = nullptr);

  // Installs a rule from configuration and marks its group static: JOINs for
  // it are refused with group_conflict. The rule table's status otherwise.
  absl::Status AddStaticRule(const cais::Rule& rule);

  // Handles one management request from `from` at `now`; returns the reply to
  // send back to `from`. Reply types (JOIN_REPLY, PONG, LEAVE_REPLY) arriving
  // at the switch get no reply: nullopt.
  std::optional<wire::MgmtMessage> Handle(const wire::MgmtMessage& request,
                                          const net::Endpoint& from, dp::TimeNs now);

  // The group forming or formed under `group_id`, or nullptr.
  const GroupState* group(uint8_t group_id) const {
    return groups_[group_id] ? &*groups_[group_id] : nullptr;
  }
  bool is_static_group(uint8_t group_id) const { return static_groups_[group_id]; }
  // Counted after each change (Recount), not per call: the switch publishes
  // them on every loop iteration.
  size_t groups_formed() const { return formed_; }
  size_t groups_forming() const { return forming_; }
  uint32_t next_seq_base() const { return next_seq_base_; }
  uint64_t reports_accepted() const { return reports_accepted_; }
  uint64_t groups_expired() const { return groups_expired_; }
  uint64_t leases_expired() const { return leases_expired_; }
  uint64_t groups_replaced() const { return groups_replaced_; }
  uint64_t groups_destroyed() const { return groups_destroyed_; }
  uint64_t ports_reclaimed() const { return ports_reclaimed_; }
  dp::TimeNs lease() const { return lease_; }
  // Takes effect at the next Expire() scan; callers keep it within
  // [kMinLeaseMs, kMaxLeaseMs].
  void set_lease(dp::TimeNs lease) { lease_ = lease; }
  // This manager is shard `index` of `count` (inca-switchd --threads):
  // JOIN_REPLYs say so, so that hosts find the other shards. count 1 = none.
  void set_shard(uint8_t index, uint8_t count) {
    shard_ = count > 1 ? index : 0;
    shards_ = count > 1 ? count : 0;
  }

  // CAIS data arrived on `port` at `now`: renews the leases of the
  // endpoint's memberships. The data path calls it for every datagram.
  void SeenOnPort(dp::PortId port, dp::TimeNs now) {
    if (port < port_seen_.size()) port_seen_[port] = now;
  }

  // True when another formed group sent data at or after `since` from an
  // address that is also one of `group_id`'s members' (see "Contended
  // samples" above).
  bool Contended(uint8_t group_id, dp::TimeNs since) const;
  uint64_t reports_contended() const { return reports_contended_; }

  // Drops groups whose lease ran out (see above). Cheap enough to call on
  // every loop iteration: it scans at most 256 groups, and only when `now`
  // has moved a tenth of the lease since the last scan.
  void Expire(dp::TimeNs now);

  // Forms `t.group_id` as a group of a tree: the ranks that JOINed here
  // (forming, same job and world size; each must be among the members at
  // its port) and the child switches' ports reduce into one rule with the
  // uplink; seq_base is the tree's. A switch with no rank of the group (a
  // root, a spine) gets the group here; it lives on its member ports'
  // traffic and dissolves after a lease of silence on all of them.
  // FailedPrecondition (static, formed, another job or world size, a JOINed
  // rank not among the members, a member port unbound), InvalidArgument
  // (rank_ports not world_size long), the rule table's status.
  absl::Status InstallTree(const TreeGroup& t, dp::TimeNs now);

  // Dissolves the JOIN-formed (or forming) group `group_id`, releasing its
  // ports (an operator's request). False when there is no such group.
  bool Destroy(uint8_t group_id);
  // An operator's release of `port`: every JOIN-formed or forming group with
  // a member on it is dissolved (counted as destroyed), then the port is
  // unbound, static or not. Returns the groups dissolved; NotFound when the
  // port is unbound.
  absl::StatusOr<int> ReleasePort(dp::PortId port);
  uint64_t reports_ignored() const { return reports_ignored_; }
  // Shapes whose timings are kept (at most kTimingShapes), and groups that
  // formed with timings from an earlier group of their shape.
  size_t timing_shapes() const { return history_.size(); }
  uint64_t timings_inherited() const { return timings_inherited_; }

 private:
  wire::MgmtMessage Join(const wire::MgmtMessage& m, const net::Endpoint& from, dp::TimeNs now);
  wire::MgmtMessage Leave(const wire::MgmtMessage& m, const net::Endpoint& from);
  wire::MgmtMessage Ping(const wire::MgmtMessage& m, const net::Endpoint& from, dp::TimeNs now);
  void Report(const wire::MgmtMessage& m, const net::Endpoint& from, dp::TimeNs now);
  // The member at (group, rank) if it is `from`, else nullptr.
  // Whether `from` is a child switch of tree group `g` (a member port of
  // the tree that no rank of the group holds here).
  bool FromChildSwitch(const GroupState& g, const net::Endpoint& from) const;
  GroupMember* FindMember(uint8_t group_id, uint16_t rank, const net::Endpoint& from);
  void Unref(dp::PortId port);
  void Dissolve(uint8_t group_id, const char* why);
  // When `m` was last heard from: its own messages or data on its port.
  dp::TimeNs LastHeard(const GroupMember& m) const {
    return std::max(m.last_seen, port_seen_[m.port]);
  }
  // Groups forming with a member at `from`'s address.
  size_t FormingFromSource(const net::Endpoint& from) const;
  // Frees a port held only by forming groups (see Floods above), never one
  // of group `joining`. False when there is none.
  bool ReclaimPort(uint8_t joining);
  // True when every member of `g` was silent for at least `quiet`.
  bool AllSilent(const GroupState& g, dp::TimeNs now, dp::TimeNs quiet) const;
  // Sets formed_ and forming_ from groups_: the last step of every public
  // call that can form, create or remove a group.
  void Recount();
  // The shape of formed group `g`.
  static GroupShape ShapeOf(const GroupState& g);
  // Keeps a dissolving group's timings under its shape (bounded).
  void KeepTimings(const GroupState& g);

  PortTable* ports_;
  cais::RuleTable* rules_;
  std::array<std::optional<GroupState>, 256> groups_;
  size_t formed_ = 0;   // groups_ formed
  size_t forming_ = 0;  // groups_ present, not formed
  std::bitset<256> static_groups_;
  std::array<uint32_t, dp::kMaxPorts> port_refs_{};  // group memberships per port
  uint32_t next_seq_base_;
  uint64_t reports_accepted_ = 0, reports_ignored_ = 0, reports_contended_ = 0;
  std::array<dp::TimeNs, dp::kMaxPorts> port_seen_{};  // last data per port
  struct Kept {
    GroupTimings timings;
    uint64_t used = 0;  // history_tick_ when last stored or taken
  };
  std::map<GroupShape, Kept> history_;
  uint64_t history_tick_ = 0;
  uint64_t timings_inherited_ = 0;
  dp::TimeNs lease_;
  EventLog* log_;
  uint8_t shard_ = 0, shards_ = 0;
  uint64_t groups_expired_ = 0, leases_expired_ = 0, groups_replaced_ = 0, groups_destroyed_ = 0;
  uint64_t ports_reclaimed_ = 0;
  dp::TimeNs next_expire_scan_ = 0;
};

}  // namespace inca::membership
