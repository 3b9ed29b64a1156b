#include "cais/slot_pool.h"

#include <algorithm>
#include <cstring>
#include <new>

namespace inca::cais::internal {

namespace {
constexpr std::align_val_t kArenaAlign{64};
}

SlotPool::SlotPool(size_t sram_bytes, size_t cell_bytes, uint32_t max_pending, double usage_limit,
                   size_t tombstone_capacity)
    : cell_bytes_(cell_bytes),
      cells_total_(sram_bytes / cell_bytes),
      max_pending_(max_pending),
      pending_cell_limit_(static_cast<size_t>(usage_limit * static_cast<double>(sram_bytes)) /
                          cell_bytes) {
  const size_t arena_bytes = cells_total_ * cell_bytes_;
  arena_ = static_cast<uint8_t*>(::operator new[](arena_bytes, kArenaAlign));
  std::memset(arena_, 0, arena_bytes);  // make the memory resident now
  slots_.resize(cells_total_);
  free_cells_.reserve(cells_total_);
  free_slots_.reserve(cells_total_);
  for (size_t i = cells_total_; i-- > 0;) {
    free_cells_.push_back(static_cast<uint32_t>(i));
    free_slots_.push_back(static_cast<uint32_t>(i));
  }
  index_.reserve(cells_total_);
  tomb_ring_.resize(tombstone_capacity);
  tombstones_.reserve(tombstone_capacity);
  Reshare();  // no claims yet: no shares, the whole pool for anyone
}

SlotPool::~SlotPool() {
  ::operator delete[](arena_, kArenaAlign);
}

void ShareLedger::Configure(size_t limit, size_t share, const std::bitset<256>& claims) {
  limit_ = limit;
  share_ = share;
  claims_ = claims;
  reserved_unused_ = 0;
  for (size_t g = 0; g < usage_.size(); ++g) reserved_unused_ += Unused(static_cast<uint8_t>(g));
}

bool ShareLedger::Admits(uint8_t g, size_t need) const {
  if (claims_[g] && usage_[g] + need <= share_) return true;
  return used_ + need + (reserved_unused_ - Unused(g)) <= limit_;
}

void ShareLedger::Add(uint8_t g, size_t n) {
  reserved_unused_ -= Unused(g);
  usage_[g] += n;
  used_ += n;
  reserved_unused_ += Unused(g);
}

void ShareLedger::Remove(uint8_t g, size_t n) {
  reserved_unused_ -= Unused(g);
  usage_[g] -= n;
  used_ -= n;
  reserved_unused_ += Unused(g);
}

void SlotPool::Reshare() {
  const size_t n = claims_.count();
  const auto part = [&](size_t limit) {
    return n == 0 ? 0 : static_cast<size_t>(share_fraction_ * static_cast<double>(limit)) / n;
  };
  chunk_shares_.Configure(max_pending_, part(max_pending_), claims_);
  cell_shares_.Configure(pending_cell_limit_, part(pending_cell_limit_), claims_);
}

uint32_t SlotPool::Find(const SlotKey& key) const noexcept {
  auto it = index_.find(key);
  return it == index_.end() ? kNoSlot : it->second;
}

void SlotPool::PushBack(List& l, uint32_t i) {
  Slot& s = slots_[i];
  s.prev = l.tail;
  s.next = kNoSlot;
  if (l.tail != kNoSlot) {
    slots_[l.tail].next = i;
  } else {
    l.head = i;
  }
  l.tail = i;
  ++l.size;
}

void SlotPool::Unlink(List& l, uint32_t i) {
  Slot& s = slots_[i];
  if (s.prev != kNoSlot) {
    slots_[s.prev].next = s.next;
  } else {
    l.head = s.next;
  }
  if (s.next != kNoSlot) {
    slots_[s.next].prev = s.prev;
  } else {
    l.tail = s.prev;
  }
  s.prev = s.next = kNoSlot;
  --l.size;
}

void SlotPool::FreeCells(Slot& s, int from) {
  for (int c = from; c < s.ncells; ++c) free_cells_.push_back(s.cells[static_cast<size_t>(c)]);
  s.ncells = static_cast<uint8_t>(from);
}

void SlotPool::Complete(uint32_t i, dp::TimeNs now) {
  Slot& s = slots_[i];
  cells_pending_ -= s.ncells;
  chunk_shares_.Remove(s.key.group, 1);
  cell_shares_.Remove(s.key.group, s.ncells);
  FreeCells(s, 1);
  cells_retained_ += s.ncells;
  Unlink(pending_, i);
  s.state = SlotState::kCompleted;
  s.since = now;
  PushBack(completed_, i);
}

void SlotPool::Shrink(uint32_t i) {
  Slot& s = slots_[i];
  const size_t freed = s.ncells > 0 ? s.ncells - 1u : 0u;
  cells_pending_ -= freed;
  cell_shares_.Remove(s.key.group, freed);
  FreeCells(s, std::min<int>(s.ncells, 1));
}

void SlotPool::Close(uint32_t i) {
  Slot& s = slots_[i];
  if (s.state == SlotState::kPending) {
    cells_pending_ -= s.ncells;
    chunk_shares_.Remove(s.key.group, 1);
    cell_shares_.Remove(s.key.group, s.ncells);
    Unlink(pending_, i);
  } else if (s.state == SlotState::kCompleted) {
    cells_retained_ -= s.ncells;
    Unlink(completed_, i);
  } else {
    return;
  }
  FreeCells(s, 0);
  index_.erase(s.key);
  AddTombstone(s.key);
  s.state = SlotState::kFree;
  free_slots_.push_back(i);
}

void SlotPool::AddTombstone(const SlotKey& key) {
  if (tomb_ring_.empty()) return;
  if (tomb_count_ == tomb_ring_.size()) {
    // Forget the oldest, unless the same key was tombstoned again since.
    const auto& [old_key, old_serial] = tomb_ring_[tomb_head_];
    auto it = tombstones_.find(old_key);
    if (it != tombstones_.end() && it->second == old_serial) tombstones_.erase(it);
    tomb_head_ = (tomb_head_ + 1) % tomb_ring_.size();
    --tomb_count_;
  }
  const uint64_t serial = ++tomb_serial_;
  tomb_ring_[(tomb_head_ + tomb_count_) % tomb_ring_.size()] = {key, serial};
  ++tomb_count_;
  tombstones_[key] = serial;
}

}  // namespace inca::cais::internal
