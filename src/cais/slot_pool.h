// Bounded slot memory of the CAIS reducer (the software "SRAM").
//
// Owns: a cell arena allocated once (sram_bytes / cell_bytes cells of
// cell_bytes, 64-byte aligned), slot records (one per cell at most), the
// key -> slot index, two age-ordered intrusive lists (pending chunks by
// admission time, completed chunks by completion time) and a bounded FIFO of
// tombstones (keys of closed chunks). Nothing grows after construction.
// Pending chunks and pending cells are also shared out between groups
// (ShareLedger, issue 18). Not thread-safe.
#pragma once

#include <array>
#include <bitset>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "inca/cais/port_mask.h"
#include "inca/dataplane/program.h"
#include "inca/wire/cais.h"

namespace inca::cais::internal {

// Identifies one chunk of one operation.
struct SlotKey {
  uint8_t group = 0;
  uint16_t layer = 0;
  uint32_t seq = 0;
  uint16_t chunk = 0;

  friend bool operator==(const SlotKey&, const SlotKey&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const SlotKey& k) {
    return H::combine(std::move(h), k.group, k.layer, k.seq, k.chunk);
  }
};

enum class SlotState : uint8_t { kFree, kPending, kCompleted };

inline constexpr uint32_t kNoSlot = UINT32_MAX;

struct Slot {
  SlotKey key;
  SlotState state = SlotState::kFree;
  wire::CaisHeader header;  // of the first contribution, flags cleared
  PortMask inputs;          // rule's input ports at admission
  PortMask outputs;         // rule's output ports at admission
  PortMask arrived;         // input ports that have contributed
  dp::TimeNs since = 0;     // admission (pending) or completion (completed) time
  uint32_t prev = kNoSlot;  // age-ordered list links
  uint32_t next = kNoSlot;
  uint8_t ncells = 0;
  // AllReduce/ReduceScatter: the first contribution's `block` (a broadcast's
  // tag, wire::BroadcastTag), which every later one must repeat.
  uint8_t tag = 0;
  // ReduceScatter: the port toward the chunk's owner (an input, or under a
  // tree the uplink: its owner is elsewhere); kMaxPorts for the others.
  dp::PortId owner = dp::kMaxPorts;
  std::array<uint32_t, kMaxGroupMembers> cells{};  // one per contributor at most
  // When each input (by its rank among `inputs`) contributed, in ns after
  // `since` (saturating): the switch wait each result reports to its port.
  std::array<uint32_t, kMaxGroupMembers> arrival{};
  // A switch in a tree (Rule::uplink): the port toward the parent, or
  // kNoUplink. Once every input contributed, cell 0 holds the partial in
  // wire format and the slot, still pending, waits on the parent's answer:
  // sent_up, when the partial first went (the end of the local wait) and
  // last went or was asked about; up_due, when this switch asks its parent
  // on its own (CaisConfig::uplink_rto_ns, doubled per unanswered ask,
  // up_asks of them).
  dp::PortId uplink = dp::kMaxPorts;
  bool sent_up = false;
  uint8_t up_asks = 0;
  dp::TimeNs up_first = 0;
  dp::TimeNs up_last = 0;
  dp::TimeNs up_due = 0;
};

// Per-group shares of one pooled resource (pending chunks, or pending
// cells), so that one group cannot starve the others. Every group with a
// claim (a rule names it) reserves `share` units. A group may take more
// (borrow) only out of what no claiming group has reserved:
//   admit(g, need) = g claims and usage[g] + need <= share
//                 or used + need + unused reserves of the others <= limit
// So a group under its share is admitted whenever the pool is within its
// own invariant, and borrowed units are never taken back mid-chunk: they
// return when the borrower's chunks complete or time out. O(1) per change;
// Configure() is O(256).
class ShareLedger {
 public:
  void Configure(size_t limit, size_t share, const std::bitset<256>& claims);
  bool Admits(uint8_t g, size_t need) const;
  void Add(uint8_t g, size_t n);
  void Remove(uint8_t g, size_t n);
  size_t usage(uint8_t g) const { return usage_[g]; }
  size_t share() const { return share_; }
  bool claims(uint8_t g) const { return claims_[g]; }

 private:
  size_t Unused(uint8_t g) const {
    return claims_[g] && usage_[g] < share_ ? share_ - usage_[g] : 0;
  }
  size_t limit_ = 0;
  size_t share_ = 0;
  size_t used_ = 0;
  size_t reserved_unused_ = 0;  // sum of Unused() over all groups
  std::array<size_t, 256> usage_{};
  std::bitset<256> claims_;
};

class SlotPool {
 public:
  // kGroupShare: the group is over its share and the rest of the pool is
  // reserved by other groups' unused shares.
  enum class Admit : uint8_t { kOk, kSlotsExhausted, kSramLimit, kGroupShare };

  SlotPool(size_t sram_bytes, size_t cell_bytes, uint32_t max_pending, double usage_limit,
           size_t tombstone_capacity);
  ~SlotPool();
  SlotPool(const SlotPool&) = delete;
  SlotPool& operator=(const SlotPool&) = delete;

  uint32_t Find(const SlotKey& key) const noexcept;
  bool IsTombstoned(const SlotKey& key) const noexcept { return tombstones_.contains(key); }

  // Admits a new pending chunk holding `ncells` cells. When free cells run
  // short, the oldest completed results are evicted first (each reported
  // through `on_evict(slot)` before it is freed and tombstoned).
  template <typename OnEvict>
  Admit Allocate(const SlotKey& key, int ncells, dp::TimeNs now, uint32_t* slot_out,
                 OnEvict&& on_evict);

  // Pending -> completed. Keeps the first cell (which must then hold the
  // result in wire format) and frees the rest.
  void Complete(uint32_t slot, dp::TimeNs now);

  // A pending slot keeps its first cell only (which must then hold the
  // partial in wire format): the tree's wait on the parent holds one cell.
  void Shrink(uint32_t slot);

  // Frees the slot and remembers its key as a tombstone.
  void Close(uint32_t slot);

  Slot& slot(uint32_t i) { return slots_[i]; }
  const Slot& slot(uint32_t i) const { return slots_[i]; }
  uint8_t* cell(uint32_t slot, int i) {
    return arena_ + size_t{slots_[slot].cells[static_cast<size_t>(i)]} * cell_bytes_;
  }

  // Changes the admission limits; chunks already admitted are unaffected.
  void SetLimits(uint32_t max_pending, double usage_limit, size_t sram_bytes) {
    max_pending_ = max_pending;
    pending_cell_limit_ =
        static_cast<size_t>(usage_limit * static_cast<double>(sram_bytes)) / cell_bytes_;
    Reshare();
  }
  // Groups with a claim share `fraction` of max_pending and of the pending
  // cell limit equally (0: no shares, first come first served).
  void SetShares(double fraction, const std::bitset<256>& claims) {
    share_fraction_ = fraction;
    claims_ = claims;
    Reshare();
  }
  const ShareLedger& chunk_shares() const { return chunk_shares_; }
  const ShareLedger& cell_shares() const { return cell_shares_; }

  uint32_t oldest_pending() const { return pending_.head; }
  uint32_t oldest_completed() const { return completed_.head; }

  size_t cell_bytes() const { return cell_bytes_; }
  size_t cells_total() const { return cells_total_; }
  size_t cells_pending() const { return cells_pending_; }
  size_t pending_cell_limit() const { return pending_cell_limit_; }
  size_t cells_retained() const { return cells_retained_; }
  uint32_t pending_chunks() const { return pending_.size; }
  uint32_t retained_chunks() const { return completed_.size; }
  size_t tombstones() const { return tombstones_.size(); }

 private:
  struct List {
    uint32_t head = kNoSlot;
    uint32_t tail = kNoSlot;
    uint32_t size = 0;
  };
  void PushBack(List& l, uint32_t i);
  void Unlink(List& l, uint32_t i);
  void FreeCells(Slot& s, int from);
  void AddTombstone(const SlotKey& key);
  void Reshare();

  ShareLedger chunk_shares_;
  ShareLedger cell_shares_;
  double share_fraction_ = 0;
  std::bitset<256> claims_;
  size_t cell_bytes_;
  size_t cells_total_;
  uint32_t max_pending_;
  size_t pending_cell_limit_;  // floor(usage_limit * sram_bytes / cell_bytes)
  uint8_t* arena_ = nullptr;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_cells_;
  std::vector<uint32_t> free_slots_;
  absl::flat_hash_map<SlotKey, uint32_t> index_;
  List pending_;
  List completed_;
  size_t cells_pending_ = 0;
  size_t cells_retained_ = 0;
  // Tombstones: FIFO ring of (key, serial); the map holds the latest serial.
  std::vector<std::pair<SlotKey, uint64_t>> tomb_ring_;
  size_t tomb_head_ = 0;
  size_t tomb_count_ = 0;
  uint64_t tomb_serial_ = 0;
  absl::flat_hash_map<SlotKey, uint64_t> tombstones_;
};

template <typename OnEvict>
SlotPool::Admit SlotPool::Allocate(const SlotKey& key, int ncells, dp::TimeNs now,
                                   uint32_t* slot_out, OnEvict&& on_evict) {
  const size_t need = static_cast<size_t>(ncells);
  if (pending_.size >= max_pending_) return Admit::kSlotsExhausted;
  if (cells_pending_ + need > pending_cell_limit_) return Admit::kSramLimit;
  // Room in the pool, but maybe not outside what other groups reserved.
  if (!chunk_shares_.Admits(key.group, 1) || !cell_shares_.Admits(key.group, need)) {
    return Admit::kGroupShare;
  }
  while (free_cells_.size() < need && completed_.head != kNoSlot) {
    const uint32_t victim = completed_.head;
    on_evict(victim);
    Close(victim);
  }
  if (free_cells_.size() < need || free_slots_.empty()) return Admit::kSramLimit;

  const uint32_t i = free_slots_.back();
  free_slots_.pop_back();
  Slot& s = slots_[i];
  s.key = key;
  s.state = SlotState::kPending;
  s.since = now;
  s.arrived = PortMask();
  s.uplink = dp::kMaxPorts;
  s.owner = dp::kMaxPorts;
  s.sent_up = false;
  s.ncells = static_cast<uint8_t>(ncells);
  for (size_t c = 0; c < need; ++c) {
    s.cells[c] = free_cells_.back();
    free_cells_.pop_back();
  }
  cells_pending_ += need;
  chunk_shares_.Add(key.group, 1);
  cell_shares_.Add(key.group, need);
  PushBack(pending_, i);
  index_.emplace(key, i);
  *slot_out = i;
  return Admit::kOk;
}

}  // namespace inca::cais::internal
