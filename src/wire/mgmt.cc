#include "inca/wire/mgmt.h"

#include <cstring>

#include "inca/util/endian.h"

namespace inca::wire {

namespace {
// Wire layout, big-endian fields.
struct MgmtWire {
  uint8_t magic;
  uint8_t version;
  uint8_t type;
  uint8_t status;
  Be32 nonce;
  uint8_t group_id;
  uint8_t reason;
  Be16 rank;
  Be16 world_size;
  Be16 port;
  Be32 seq_base;
  Be16 rank_port_count;
  uint8_t shards;
  uint8_t shard;
  // A JOIN_REPLY's or PONG's window_chunks (bytes 24-25, then 6 bytes
  // zero); every other message's job.
  Be64 job;
  Be32 lease_ms;
};
static_assert(sizeof(MgmtWire) == kMgmtHeaderBytes);

// Messages whose bytes 24-31 carry the window advice instead of a job.
bool Advises(uint8_t type) {
  return type == static_cast<uint8_t>(MgmtType::kJoinReply) ||
         type == static_cast<uint8_t>(MgmtType::kPong);
}

// The body that follows a REPORT's header.
struct ReportWire {
  Be64 bytes;
  Be32 duration_us;
  uint8_t path;
  uint8_t reserved[3];
};
static_assert(sizeof(ReportWire) == kMgmtReportBytes);
}  // namespace

std::string_view ToString(MgmtType t) {
  switch (t) {
    case MgmtType::kJoin: return "join";
    case MgmtType::kJoinReply: return "join_reply";
    case MgmtType::kPing: return "ping";
    case MgmtType::kPong: return "pong";
    case MgmtType::kLeave: return "leave";
    case MgmtType::kLeaveReply: return "leave_reply";
    case MgmtType::kReport: return "report";
  }
  return "unknown";
}

std::string_view ToString(MgmtStatus s) {
  switch (s) {
    case MgmtStatus::kOk: return "ok";
    case MgmtStatus::kPending: return "pending";
    case MgmtStatus::kRefused: return "refused";
    case MgmtStatus::kUnknown: return "unknown_member";
  }
  return "unknown";
}

std::string_view ToString(MgmtReason r) {
  switch (r) {
    case MgmtReason::kNone: return "none";
    case MgmtReason::kBadRequest: return "bad_request";
    case MgmtReason::kWorldSizeMismatch: return "world_size_mismatch";
    case MgmtReason::kRankTaken: return "rank_taken";
    case MgmtReason::kNoFreePort: return "no_free_port";
    case MgmtReason::kGroupConflict: return "group_conflict";
    case MgmtReason::kPortTaken: return "port_taken";
    case MgmtReason::kGroupBusy: return "group_busy";
    case MgmtReason::kSourceLimit: return "source_limit";
  }
  return "unknown";
}

std::string_view ToString(ReportPath p) {
  switch (p) {
    case ReportPath::kSwitch: return "switch";
    case ReportPath::kHost: return "host";
  }
  return "unknown";
}

bool ParseMgmt(std::span<const uint8_t> d, MgmtMessage* out) {
  if (d.size() < kMgmtHeaderBytes) return false;
  MgmtWire w;
  std::memcpy(&w, d.data(), sizeof(w));
  if (w.magic != kMgmtMagic || w.version != kMgmtVersion) return false;
  if (w.type < 1 || w.type > kMgmtTypeCount || w.status > 3) return false;
  // Byte 9: a JOIN_REPLY ok's block order, else the reason.
  const bool ordered = w.type == static_cast<uint8_t>(MgmtType::kJoinReply) &&
                       w.status == static_cast<uint8_t>(MgmtStatus::kOk);
  if (w.reason > (ordered ? static_cast<uint8_t>(BlockOrder::kRanks) : kMgmtReasonMax)) {
    return false;
  }
  // Shards only in a JOIN_REPLY, and the index within the count.
  if (w.type != static_cast<uint8_t>(MgmtType::kJoinReply) && (w.shards != 0 || w.shard != 0))
    return false;
  if (w.shard != 0 && w.shard >= w.shards) return false;
  const size_t n = w.rank_port_count.value();
  const bool report = w.type == static_cast<uint8_t>(MgmtType::kReport);
  ReportWire r{};
  if (report) {
    if (n != 0 || d.size() != kMgmtHeaderBytes + kMgmtReportBytes) return false;
    std::memcpy(&r, d.data() + kMgmtHeaderBytes, sizeof(r));
    if (r.path > 1 || r.reserved[0] != 0 || r.reserved[1] != 0 || r.reserved[2] != 0) return false;
  } else {
    if (n > kMaxMgmtRankPorts || d.size() != kMgmtHeaderBytes + 2 * n) return false;
    if (n != 0 && n != w.world_size.value()) return false;
  }
  MgmtMessage m;
  m.type = static_cast<MgmtType>(w.type);
  m.status = static_cast<MgmtStatus>(w.status);
  if (ordered) {
    m.block_order = static_cast<BlockOrder>(w.reason);
  } else {
    m.reason = static_cast<MgmtReason>(w.reason);
  }
  m.group_id = w.group_id;
  m.nonce = w.nonce.value();
  m.rank = w.rank.value();
  m.world_size = w.world_size.value();
  m.port = w.port.value();
  m.seq_base = w.seq_base.value();
  if (Advises(w.type)) {
    const uint64_t v = w.job.value();
    if ((v & 0x0000FFFFFFFFFFFFull) != 0) return false;  // the six reserved bytes
    m.window_chunks = static_cast<uint16_t>(v >> 48);
  } else {
    m.job = w.job.value();
  }
  m.lease_ms = w.lease_ms.value();
  m.shards = w.shards;
  m.shard = w.shard;
  if (report) {
    m.report_bytes = r.bytes.value();
    m.report_duration_us = r.duration_us.value();
    m.report_path = static_cast<ReportPath>(r.path);
  }
  m.rank_ports.resize(n);
  for (size_t i = 0; i < n; ++i) {
    Be16 p;
    std::memcpy(&p, d.data() + kMgmtHeaderBytes + 2 * i, 2);
    m.rank_ports[i] = p.value();
  }
  *out = std::move(m);
  return true;
}

void SerializeMgmt(const MgmtMessage& m, std::vector<uint8_t>* out) {
  MgmtWire w{};
  w.magic = kMgmtMagic;
  w.version = kMgmtVersion;
  w.type = static_cast<uint8_t>(m.type);
  w.status = static_cast<uint8_t>(m.status);
  w.nonce.set(m.nonce);
  w.group_id = m.group_id;
  w.reason = m.type == MgmtType::kJoinReply && m.status == MgmtStatus::kOk
                 ? static_cast<uint8_t>(m.block_order)
                 : static_cast<uint8_t>(m.reason);
  w.rank.set(m.rank);
  w.world_size.set(m.world_size);
  w.port.set(m.port);
  w.seq_base.set(m.seq_base);
  w.job.set(Advises(w.type) ? uint64_t{m.window_chunks} << 48 : m.job);
  w.lease_ms.set(m.lease_ms);
  if (m.type == MgmtType::kJoinReply) {
    w.shards = m.shards;
    w.shard = m.shard;
  }
  if (m.type == MgmtType::kReport) {
    w.rank_port_count.set(0);
    ReportWire r{};
    r.bytes.set(m.report_bytes);
    r.duration_us.set(m.report_duration_us);
    r.path = static_cast<uint8_t>(m.report_path);
    out->resize(kMgmtHeaderBytes + kMgmtReportBytes);
    std::memcpy(out->data(), &w, sizeof(w));
    std::memcpy(out->data() + kMgmtHeaderBytes, &r, sizeof(r));
    return;
  }
  w.rank_port_count.set(static_cast<uint16_t>(m.rank_ports.size()));
  out->resize(kMgmtHeaderBytes + 2 * m.rank_ports.size());
  std::memcpy(out->data(), &w, sizeof(w));
  for (size_t i = 0; i < m.rank_ports.size(); ++i) {
    Be16 p(m.rank_ports[i]);
    std::memcpy(out->data() + kMgmtHeaderBytes + 2 * i, &p, 2);
  }
}

}  // namespace inca::wire
