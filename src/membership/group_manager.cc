#include "membership/group_manager.h"

#include <algorithm>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "util/event_format.h"

namespace inca::membership {

using wire::MgmtMessage;
using wire::MgmtReason;
using wire::MgmtStatus;
using wire::MgmtType;

namespace {

cais::RuleKey GroupKey(uint8_t group_id) {
  return cais::RuleKey{group_id, std::nullopt, std::nullopt};
}

MgmtMessage ReplyTo(const MgmtMessage& m, MgmtType type) {
  MgmtMessage r;
  r.type = type;
  r.group_id = m.group_id;
  r.nonce = m.nonce;
  r.rank = m.rank;
  r.world_size = m.world_size;
  r.port = wire::kAnyPort;
  return r;
}

}  // namespace

namespace {

// A group with no member yet (a first JOIN, or a tree's install).
GroupState NewGroup(uint8_t group_id, uint16_t world_size, uint64_t job) {
  GroupState g;
  g.group_id = group_id;
  g.world_size = world_size;
  g.job = job;
  g.ranks.resize(world_size);
  return g;
}

}  // namespace

std::vector<uint16_t> GroupState::rank_ports() const {
  if (tree) return tree_rank_ports;
  std::vector<uint16_t> v;
  v.reserve(ranks.size());
  for (const auto& r : ranks) v.push_back(r ? r->port : wire::kAnyPort);
  return v;
}

GroupManager::GroupManager(PortTable* ports, cais::RuleTable* rules, uint32_t seq_start,
                           dp::TimeNs lease, EventLog* log)
    : ports_(ports), rules_(rules), next_seq_base_(seq_start), lease_(lease), log_(log) {
  static NullEventLog none;
  if (log_ == nullptr) log_ = &none;
}

bool GroupManager::AllSilent(const GroupState& g, dp::TimeNs now, dp::TimeNs quiet) const {
  for (const auto& r : g.ranks) {
    if (r && now - LastHeard(*r) < quiet) return false;
  }
  return true;
}

absl::StatusOr<int> GroupManager::ReleasePort(dp::PortId port) {
  if (ports_->endpoint(port) == nullptr) {
    return absl::NotFoundError(absl::StrCat("port ", port, " is not bound"));
  }
  int dissolved = 0;
  for (int id = 0; id < 256; ++id) {
    const auto& g = groups_[static_cast<size_t>(id)];
    if (!g) continue;
    const bool member = std::any_of(g->ranks.begin(), g->ranks.end(),
                                    [&](const auto& r) { return r && r->port == port; });
    if (member && Destroy(static_cast<uint8_t>(id))) ++dissolved;
  }
  if (ports_->endpoint(port) != nullptr) ports_->Remove(port);  // static, or still referenced
  port_refs_[port] = 0;
  Emit(*log_, LogLevel::kInfo, "event=port_released_by_operator port={} groups_dissolved={}", port,
       dissolved);
  return dissolved;
}

bool GroupManager::Destroy(uint8_t group_id) {
  if (!groups_[group_id]) return false;
  Dissolve(group_id, "operator");
  ++groups_destroyed_;
  Recount();
  return true;
}

absl::Status GroupManager::AddStaticRule(const cais::Rule& rule) {
  // A rule for one layer overrides the group-wide rule for that layer's
  // traffic; it may sit beside a group that JOIN forms. A group-wide rule
  // makes the group static, and JOIN then refuses it.
  const bool group_wide = !rule.key.layer_id.has_value();
  if (group_wide && groups_[rule.key.group_id]) {
    return absl::FailedPreconditionError("group " + std::to_string(rule.key.group_id) +
                                         " was formed by JOIN; it cannot also have group-wide "
                                         "static rules (a rule for one layer can)");
  }
  if (absl::Status s = rules_->Add(rule); !s.ok()) return s;
  if (group_wide) static_groups_.set(rule.key.group_id);
  return absl::OkStatus();
}

void GroupManager::Recount() {
  formed_ = forming_ = 0;
  for (const auto& g : groups_) {
    if (g) ++(g->formed ? formed_ : forming_);
  }
}

std::optional<MgmtMessage> GroupManager::Handle(const MgmtMessage& request,
                                                const net::Endpoint& from, dp::TimeNs now) {
  // Join and Leave can create, form or remove a group (Recount); Ping and
  // Report cannot.
  std::optional<MgmtMessage> reply;
  switch (request.type) {
    case MgmtType::kJoin: reply = Join(request, from, now); break;
    case MgmtType::kLeave: reply = Leave(request, from); break;
    case MgmtType::kPing: return Ping(request, from, now);
    case MgmtType::kReport: Report(request, from, now); return std::nullopt;
    case MgmtType::kJoinReply:
    case MgmtType::kPong:
    case MgmtType::kLeaveReply: return std::nullopt;
  }
  Recount();
  return reply;
}

double PathAverage::BestUsPerByte() const {
  const size_t n = std::min<size_t>(samples, recent_us_per_byte.size());
  if (n == 0) return 0;
  return *std::min_element(recent_us_per_byte.begin(), recent_us_per_byte.begin() + n);
}

void GroupManager::Report(const MgmtMessage& m, const net::Endpoint& from, dp::TimeNs now) {
  GroupMember* member = FindMember(m.group_id, m.rank, from);
  auto& g = groups_[m.group_id];
  // Under a tree a child switch passes its ranks' REPORTs up
  // (switchd::CaisDispatcher): the root decides offload from all of them.
  const bool from_child = member == nullptr && g && g->tree && FromChildSwitch(*g, from);
  if ((member == nullptr && !from_child) || !g->formed || m.report_bytes == 0) {
    ++reports_ignored_;
    return;
  }
  if (member != nullptr) member->last_seen = now;
  const dp::TimeNs began = now - static_cast<dp::TimeNs>(m.report_duration_us) * 1000;
  if (Contended(m.group_id, began)) {
    ++reports_contended_;
    return;
  }
  PathAverage& a = g->timings[wire::SizeClass(m.report_bytes)][static_cast<size_t>(m.report_path)];
  const double w = a.samples == 0 ? 1.0 : kTimingWeight;
  a.mean_us += w * (static_cast<double>(m.report_duration_us) - a.mean_us);
  a.mean_bytes += w * (static_cast<double>(m.report_bytes) - a.mean_bytes);
  a.last = now;
  a.recent_us_per_byte[a.samples % a.recent_us_per_byte.size()] =
      static_cast<double>(m.report_duration_us) / static_cast<double>(m.report_bytes);
  ++a.samples;
  ++reports_accepted_;
}

bool GroupManager::Contended(uint8_t group_id, dp::TimeNs since) const {
  const auto& g = groups_[group_id];
  if (!g) return false;
  std::vector<std::array<uint8_t, 16>> mine;  // at most 1,024 members
  for (const auto& r : g->ranks) {
    if (r) mine.push_back(r->endpoint.V6MappedAddress());
  }
  for (const auto& other : groups_) {
    if (!other || other->group_id == group_id || !other->formed) continue;
    for (const auto& r : other->ranks) {
      if (!r || port_seen_[r->port] < since || port_seen_[r->port] == 0) continue;
      const auto addr = r->endpoint.V6MappedAddress();
      if (std::find(mine.begin(), mine.end(), addr) != mine.end()) return true;
    }
  }
  return false;
}

bool GroupManager::FromChildSwitch(const GroupState& g, const net::Endpoint& from) const {
  const std::optional<dp::PortId> port = ports_->Lookup(from);
  if (!port ||
      std::find(g.tree_members.begin(), g.tree_members.end(), *port) == g.tree_members.end()) {
    return false;
  }
  for (const auto& r : g.ranks) {
    if (r && r->port == *port) return false;  // a rank's port, not a child's
  }
  return true;
}

GroupMember* GroupManager::FindMember(uint8_t group_id, uint16_t rank, const net::Endpoint& from) {
  auto& g = groups_[group_id];
  if (!g || rank >= g->ranks.size()) return nullptr;
  auto& slot = g->ranks[rank];
  return (slot && slot->endpoint == from) ? &*slot : nullptr;
}

void GroupManager::Unref(dp::PortId port) {
  if (port_refs_[port] > 0 && --port_refs_[port] == 0) {
    if (ports_->Release(port)) Emit(*log_, LogLevel::kDebug, "event=port_released port={}", port);
  }
}

GroupShape GroupManager::ShapeOf(const GroupState& g) {
  GroupShape shape{g.world_size, {}};
  for (const auto& r : g.ranks) {
    if (r) shape.hosts.push_back(r->endpoint.V6MappedAddress());
  }
  std::sort(shape.hosts.begin(), shape.hosts.end());
  return shape;
}

void GroupManager::KeepTimings(const GroupState& g) {
  const bool any = std::any_of(g.timings.begin(), g.timings.end(), [](const auto& paths) {
    return paths[0].samples > 0 || paths[1].samples > 0;
  });
  if (!any) return;
  GroupShape shape = ShapeOf(g);
  auto it = history_.find(shape);
  if (it == history_.end() && history_.size() >= kTimingShapes) {
    history_.erase(std::min_element(
        history_.begin(), history_.end(),
        [](const auto& a, const auto& b) { return a.second.used < b.second.used; }));
  }
  history_[std::move(shape)] = Kept{g.timings, ++history_tick_};
}

absl::Status GroupManager::InstallTree(const TreeGroup& t, dp::TimeNs now) {
  const auto refuse = [&](const std::string& why) {
    return absl::FailedPreconditionError(absl::StrCat("group ", t.group_id, ": ", why));
  };
  if (static_groups_[t.group_id]) return refuse("it is static (a group-wide rule from the config)");
  if (t.rank_ports.size() != t.world_size || t.world_size == 0) {
    return absl::InvalidArgumentError(absl::StrCat("group ", t.group_id, ": rank_ports has ",
                                                   t.rank_ports.size(), " entries for world size ",
                                                   t.world_size));
  }
  auto& g = groups_[t.group_id];
  if (g && g->formed) return refuse("it is formed already");
  if (g && (g->job != t.job || g->world_size != t.world_size)) {
    return refuse(
        absl::StrCat("the ranks here joined job ", g->job, " of world size ", g->world_size));
  }
  cais::PortMask ports;
  for (dp::PortId p : t.members) {
    if (!ports_->endpoint(p)) return refuse(absl::StrCat("member port ", p, " is not bound"));
    ports.add(p);
  }
  if (t.uplink && !ports_->endpoint(*t.uplink)) {
    return refuse(absl::StrCat("uplink port ", *t.uplink, " is not bound"));
  }
  if (g) {
    for (size_t rank = 0; rank < g->ranks.size(); ++rank) {
      const auto& r = g->ranks[rank];
      if (r && (!ports.contains(r->port) || t.rank_ports[rank] != r->port)) {
        return refuse(absl::StrCat("rank ", rank, " joined at port ", r->port,
                                   ", which the tree does not give it"));
      }
    }
  }
  cais::Rule rule{GroupKey(t.group_id), ports, ports, std::nullopt};
  rule.uplink = t.uplink;
  rule.rank_ports.assign(t.rank_ports.begin(), t.rank_ports.end());
  if (absl::Status s = rules_->Add(rule); !s.ok()) return s;
  if (!g) g = NewGroup(t.group_id, t.world_size, t.job);
  g->tree = true;
  g->tree_members = t.members;
  g->tree_rank_ports = t.rank_ports;
  g->tree_uplink = t.uplink;
  g->tree_window = t.window_chunks;
  g->formed = true;
  g->formed_at = now;
  g->seq_base = t.seq_base;
  // Serial-number order (the counter wraps): never behind the tree's.
  if (static_cast<int32_t>(t.seq_base - next_seq_base_) >= 0) {
    next_seq_base_ = t.seq_base + kSeqBaseStride;
  }
  Emit(*log_, LogLevel::kInfo,
       "event=tree_installed group={} world_size={} ports={} uplink={} seq_base={}", t.group_id,
       t.world_size, ports.ToString(), t.uplink ? static_cast<int>(*t.uplink) : -1, t.seq_base);
  Recount();
  return absl::OkStatus();
}

void GroupManager::Dissolve(uint8_t group_id, const char* why) {
  auto& g = groups_[group_id];
  if (!g) return;
  if (g->formed) {
    KeepTimings(*g);
    // Only this manager installs (group, *, *) for a formed group.
    (void)rules_->Delete(GroupKey(group_id));
  }
  for (const auto& r : g->ranks) {
    if (r) Unref(r->port);
  }
  Emit(*log_, LogLevel::kInfo, "event=group_dissolved group={} world_size={} reason={}", group_id,
       g->world_size, why);
  g.reset();
}

MgmtMessage GroupManager::Join(const MgmtMessage& m, const net::Endpoint& from, dp::TimeNs now) {
  MgmtMessage reply = ReplyTo(m, MgmtType::kJoinReply);
  auto refuse = [&](MgmtReason reason) {
    reply.status = MgmtStatus::kRefused;
    reply.reason = reason;
    // group_busy is retried every 20 ms while a dead group waits out its
    // half lease: not worth a warning each time.
    Emit(*log_, reason == MgmtReason::kGroupBusy ? LogLevel::kDebug : LogLevel::kWarn,
         "event=join_refused group={} rank={} world_size={} endpoint={} reason={}", m.group_id,
         m.rank, m.world_size, from.ToString(), wire::ToString(reason));
    return reply;
  };
  if (m.world_size == 0 || m.world_size > cais::kMaxTreeRanks || m.rank >= m.world_size ||
      (m.port != wire::kAnyPort && m.port >= dp::kMaxPorts)) {
    return refuse(MgmtReason::kBadRequest);
  }
  if (static_groups_[m.group_id]) return refuse(MgmtReason::kGroupConflict);
  auto& g = groups_[m.group_id];
  if (g && g->job != m.job) {
    if (!AllSilent(*g, now, lease_ / 2)) {
      reply.world_size = g->world_size;
      return refuse(MgmtReason::kGroupBusy);
    }
    // A re-run after a crash: its own dead group gives way.
    Emit(*log_, LogLevel::kInfo, "event=group_replaced group={} old_job={:#x} new_job={:#x}",
         m.group_id, g->job, m.job);
    Dissolve(m.group_id, "replaced_by_new_job");
    ++groups_replaced_;
  }
  if (g && g->world_size != m.world_size) {
    reply.world_size = g->world_size;  // tells the host what the group expects
    return refuse(MgmtReason::kWorldSizeMismatch);
  }

  auto current = [&](const GroupMember& member) {
    reply.port = member.port;
    reply.lease_ms = static_cast<uint32_t>(lease_ / dp::kNsPerMs);
    reply.shards = shards_;
    reply.shard = shard_;
    if (g->formed) {
      reply.status = MgmtStatus::kOk;
      reply.seq_base = g->seq_base;
      reply.rank_ports = g->rank_ports();
      // A tree's switches place blocks by rank (docs/design/tree.md, "Blocks").
      reply.block_order = g->tree ? wire::BlockOrder::kRanks : wire::BlockOrder::kPorts;
    } else {
      reply.status = MgmtStatus::kPending;
    }
    return reply;
  };

  if (g) {
    auto& slot = g->ranks[m.rank];
    if (slot && slot->endpoint == from) {  // a resend: same answer
      slot->last_seen = now;
      return current(*slot);
    }
    if (slot) return refuse(MgmtReason::kRankTaken);
    if (g->tree) return refuse(MgmtReason::kGroupConflict);  // that rank is elsewhere in the tree
    if (g->joined >= cais::kMaxGroupMembers) return refuse(MgmtReason::kBadRequest);
    for (const auto& r : g->ranks) {
      if (r && r->endpoint == from) return refuse(MgmtReason::kBadRequest);  // two ranks, one port
    }
  }

  if (!g && FormingFromSource(from) >= kMaxFormingPerSource) {
    return refuse(MgmtReason::kSourceLimit);
  }
  auto port = ports_->Bind(from, m.port);
  if (!port.ok() && ports_->full() && ReclaimPort(m.group_id)) {
    port = ports_->Bind(from, m.port);
  }
  if (!port.ok()) return refuse(MgmtReason::kNoFreePort);
  if (!g) g = NewGroup(m.group_id, m.world_size, m.job);
  ++port_refs_[*port];
  g->ranks[m.rank] = GroupMember{from, *port, now, now};
  ++g->joined;
  Emit(*log_, LogLevel::kInfo,
       "event=member_joined group={} rank={} world_size={} joined={} endpoint={} port={}",
       m.group_id, m.rank, m.world_size, g->joined, from.ToString(), *port);

  if (g->joined == g->world_size) {
    cais::PortMask ports;
    for (const auto& r : g->ranks) ports.add(r->port);
    cais::Rule rule{GroupKey(m.group_id), ports, ports, std::nullopt};
    if (absl::Status s = rules_->Add(rule); !s.ok()) {
      // Undo this JOIN: the group stays as it was.
      g->ranks[m.rank].reset();
      --g->joined;
      Unref(*port);
      if (g->joined == 0) g.reset();
      Emit(*log_, LogLevel::kWarn, "event=rule_install_failed group={} error=\"{}\"", m.group_id,
           std::string(s.message()));
      return refuse(MgmtReason::kGroupConflict);
    }
    g->formed = true;
    g->formed_at = now;
    if (auto it = history_.find(ShapeOf(*g)); it != history_.end()) {
      g->timings = it->second.timings;
      it->second.used = ++history_tick_;
      ++timings_inherited_;
    }
    g->seq_base = next_seq_base_;
    next_seq_base_ += kSeqBaseStride;  // wraps modulo 2^32
    Emit(*log_, LogLevel::kInfo, "event=group_formed group={} world_size={} ports={} seq_base={}",
         m.group_id, g->world_size, ports.ToString(), g->seq_base);
  }
  return current(*g->ranks[m.rank]);
}

size_t GroupManager::FormingFromSource(const net::Endpoint& from) const {
  const auto addr = from.V6MappedAddress();
  size_t n = 0;
  for (const auto& g : groups_) {
    if (!g || g->formed) continue;
    for (const auto& r : g->ranks) {
      if (r && r->endpoint.V6MappedAddress() == addr) {
        ++n;
        break;
      }
    }
  }
  return n;
}

bool GroupManager::ReclaimPort(uint8_t joining) {
  // Per port: held only by forming groups (and not by `joining`), and when
  // it first joined one of them.
  std::array<bool, dp::kMaxPorts> forming_only{};
  std::array<dp::TimeNs, dp::kMaxPorts> since{};
  for (size_t p = 0; p < forming_only.size(); ++p) {
    forming_only[p] = port_refs_[p] > 0 && !ports_->is_static(static_cast<dp::PortId>(p));
    since[p] = INT64_MAX;
  }
  for (const auto& g : groups_) {
    if (!g) continue;
    for (const auto& r : g->ranks) {
      if (!r) continue;
      if (g->formed || g->group_id == joining) forming_only[r->port] = false;
      since[r->port] = std::min(since[r->port], r->joined_at);
    }
  }
  // The source address holding the most such ports; its earliest port.
  absl::flat_hash_map<std::array<uint8_t, 16>, size_t> per_source;
  for (size_t p = 0; p < forming_only.size(); ++p) {
    if (forming_only[p])
      ++per_source[ports_->endpoint(static_cast<dp::PortId>(p))->V6MappedAddress()];
  }
  std::array<size_t, dp::kMaxPorts> count{};
  for (size_t p = 0; p < forming_only.size(); ++p) {
    if (forming_only[p])
      count[p] = per_source[ports_->endpoint(static_cast<dp::PortId>(p))->V6MappedAddress()];
  }
  int victim = -1;
  for (size_t p = 0; p < forming_only.size(); ++p) {
    if (!forming_only[p]) continue;
    if (victim < 0 || count[p] > count[static_cast<size_t>(victim)] ||
        (count[p] == count[static_cast<size_t>(victim)] &&
         since[p] < since[static_cast<size_t>(victim)])) {
      victim = static_cast<int>(p);
    }
  }
  if (victim < 0) return false;
  const auto port = static_cast<dp::PortId>(victim);
  Emit(*log_, LogLevel::kWarn,
       "event=port_reclaimed port={} endpoint={} forming_ports_of_source={}", port,
       ports_->endpoint(port)->ToString(), count[static_cast<size_t>(victim)]);
  for (auto& g : groups_) {
    if (!g || g->formed) continue;
    for (auto& r : g->ranks) {
      if (!r || r->port != port) continue;
      r.reset();
      --g->joined;
      Unref(port);
    }
    if (g->joined == 0) g.reset();
  }
  ++ports_reclaimed_;
  return true;
}

void GroupManager::Expire(dp::TimeNs now) {
  if (now < next_expire_scan_) return;
  next_expire_scan_ = now + std::max<dp::TimeNs>(lease_ / 10, dp::kNsPerMs);
  for (auto& g : groups_) {
    if (!g) continue;
    if (g->formed && g->tree && g->joined == 0) {
      // A tree's group with no rank here lives on its member ports' data.
      dp::TimeNs heard = g->formed_at;
      for (dp::PortId p : g->tree_members) heard = std::max(heard, port_seen_[p]);
      if (now - heard >= lease_) {
        ++leases_expired_;
        Dissolve(g->group_id, "tree_silent");
      }
      continue;
    }
    if (g->formed) {
      // Any member silent for a lease: the group cannot reduce without it.
      for (size_t rank = 0; rank < g->ranks.size(); ++rank) {
        const auto& r = g->ranks[rank];
        if (!r || now - LastHeard(*r) < lease_) continue;
        Emit(*log_, LogLevel::kWarn,
             "event=lease_expired group={} rank={} endpoint={} silent_ms={}", g->group_id, rank,
             r->endpoint.ToString(), (now - LastHeard(*r)) / dp::kNsPerMs);
        ++leases_expired_;
        Dissolve(g->group_id, "lease_expired");
        break;
      }
      continue;
    }
    if (!AllSilent(*g, now, lease_)) continue;
    Emit(*log_, LogLevel::kWarn,
         "event=group_expired group={} world_size={} joined={} reason=forming_timeout", g->group_id,
         g->world_size, g->joined);
    for (const auto& r : g->ranks) {
      if (r) Unref(r->port);
    }
    ++groups_expired_;
    g.reset();
  }
  Recount();
}

MgmtMessage GroupManager::Leave(const MgmtMessage& m, const net::Endpoint& from) {
  MgmtMessage reply = ReplyTo(m, MgmtType::kLeaveReply);
  GroupMember* member = FindMember(m.group_id, m.rank, from);
  if (member == nullptr) {
    reply.status = MgmtStatus::kUnknown;
    return reply;
  }
  auto& g = groups_[m.group_id];
  reply.status = MgmtStatus::kOk;
  reply.world_size = g->world_size;
  Emit(*log_, LogLevel::kInfo, "event=member_left group={} rank={} endpoint={} port={}", m.group_id,
       m.rank, from.ToString(), member->port);
  if (g->formed) {
    Dissolve(m.group_id, "member_left");
  } else {
    const dp::PortId port = member->port;
    g->ranks[m.rank].reset();
    --g->joined;
    Unref(port);
    if (g->joined == 0) g.reset();
  }
  return reply;
}

MgmtMessage GroupManager::Ping(const MgmtMessage& m, const net::Endpoint& from, dp::TimeNs now) {
  MgmtMessage reply = ReplyTo(m, MgmtType::kPong);
  GroupMember* member = FindMember(m.group_id, m.rank, from);
  if (member == nullptr) {
    reply.status = MgmtStatus::kUnknown;
    return reply;
  }
  member->last_seen = now;
  const auto& g = groups_[m.group_id];
  reply.status = MgmtStatus::kOk;
  reply.world_size = g->world_size;
  reply.port = member->port;
  reply.seq_base = g->formed ? g->seq_base : 0;
  reply.lease_ms = static_cast<uint32_t>(lease_ / dp::kNsPerMs);
  return reply;
}

}  // namespace inca::membership
