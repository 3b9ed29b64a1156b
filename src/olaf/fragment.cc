#include "inca/olaf/fragment.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"

namespace inca::olaf {

static_assert(std::endian::native == std::endian::little,
              "OLAF payloads are little-endian f32; a big-endian host needs byte swaps here");

namespace {

absl::Status CheckCount(size_t n, size_t max) {
  if (n == 0) return absl::InvalidArgumentError("fragmenter: no values (at least one is needed)");
  if (n > max) {
    return absl::InvalidArgumentError(absl::StrCat("fragmenter: ", n, " values exceed the ", max,
                                                   " of ", kMaxFragments, " fragments"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string_view ToString(FragmentOutcome o) {
  switch (o) {
    case FragmentOutcome::kBuffered: return "buffered";
    case FragmentOutcome::kCompleted: return "completed";
    case FragmentOutcome::kDuplicate: return "duplicate";
    case FragmentOutcome::kInconsistent: return "inconsistent";
    case FragmentOutcome::kTooLarge: return "too_large";
  }
  return "unknown";
}

// ---- Fragmenter ----

absl::StatusOr<Fragmenter> Fragmenter::Create(uint32_t max_payload_bytes) {
  if (max_payload_bytes < 4 || max_payload_bytes % 4 != 0 ||
      max_payload_bytes + kOlafUpdateHeaderBytes > kMaxOlafDatagramBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("fragmenter: max_payload_bytes must be a multiple of 4 in [4, ",
                     kMaxOlafDatagramBytes - kOlafUpdateHeaderBytes, "], got ", max_payload_bytes));
  }
  return Fragmenter(max_payload_bytes);
}

size_t Fragmenter::FragmentCount(size_t elements) const {
  const size_t per = elements_per_fragment();
  return (elements + per - 1) / per;
}

namespace {

// One message of `values` cut into `n` fragments of at most `per`
// elements, each `header` (frag_index, frag_count, payload_len set) then
// its slice, handed to `emit` from one reused buffer.
template <typename Header>
void EmitFragments(Header h, size_t header_bytes,
                   size_t (*serialize)(const Header&, std::span<uint8_t>) noexcept, size_t per,
                   size_t n, size_t max_payload, std::span<const float> values,
                   absl::FunctionRef<void(std::span<const uint8_t>)> emit) {
  std::vector<uint8_t> buf(header_bytes + max_payload);
  h.frag_count = static_cast<uint16_t>(n);
  for (size_t i = 0; i < n; ++i) {
    const size_t first = i * per;
    const size_t count = std::min(per, values.size() - first);
    h.frag_index = static_cast<uint16_t>(i);
    h.payload_len = static_cast<uint32_t>(count * 4);
    serialize(h, buf);
    std::memcpy(buf.data() + header_bytes, values.data() + first, count * 4);
    emit(std::span<const uint8_t>(buf.data(), header_bytes + count * 4));
  }
}

// Every fragment `for_each` emits, copied.
absl::StatusOr<std::vector<std::vector<uint8_t>>> Collect(
    size_t expected,
    absl::FunctionRef<absl::Status(absl::FunctionRef<void(std::span<const uint8_t>)>)> for_each) {
  std::vector<std::vector<uint8_t>> out;
  out.reserve(expected);
  absl::Status s =
      for_each([&](std::span<const uint8_t> d) { out.emplace_back(d.begin(), d.end()); });
  if (!s.ok()) return s;
  return out;
}

}  // namespace

absl::Status Fragmenter::ForEachUpdate(
    const UpdateHeader& header, std::span<const float> values,
    absl::FunctionRef<void(std::span<const uint8_t>)> emit) const {
  if (absl::Status s = CheckCount(values.size(), MaxElements()); !s.ok()) return s;
  EmitFragments(header, kOlafUpdateHeaderBytes, &SerializeUpdateHeader, elements_per_fragment(),
                FragmentCount(values.size()), max_payload_bytes_, values, emit);
  return absl::OkStatus();
}

absl::Status Fragmenter::ForEachModel(
    const ModelHeader& header, std::span<const float> values,
    absl::FunctionRef<void(std::span<const uint8_t>)> emit) const {
  if (absl::Status s = CheckCount(values.size(), MaxElements()); !s.ok()) return s;
  EmitFragments(header, kOlafModelHeaderBytes, &SerializeModelHeader, elements_per_fragment(),
                FragmentCount(values.size()), max_payload_bytes_, values, emit);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::vector<uint8_t>>> Fragmenter::Update(
    const UpdateHeader& header, std::span<const float> values) const {
  return Collect(values.empty() ? 0 : std::min(FragmentCount(values.size()), kMaxFragments),
                 [&](auto emit) { return ForEachUpdate(header, values, emit); });
}

absl::StatusOr<std::vector<std::vector<uint8_t>>> Fragmenter::Model(
    const ModelHeader& header, std::span<const float> values) const {
  return Collect(values.empty() ? 0 : std::min(FragmentCount(values.size()), kMaxFragments),
                 [&](auto emit) { return ForEachModel(header, values, emit); });
}

// ---- Reassembler ----

absl::Status ReassemblerOptions::Validate() const {
  if (max_pending < 1) return absl::InvalidArgumentError("reassembly: max_pending must be >= 1");
  if (max_pending_bytes < 1) {
    return absl::InvalidArgumentError("reassembly: max_pending_bytes must be >= 1");
  }
  if (timeout_ns <= 0) return absl::InvalidArgumentError("reassembly: timeout_ns must be > 0");
  return absl::OkStatus();
}

Reassembler::Reassembler(const ReassemblerOptions& o) : options_(o) {
  options_.max_pending = std::max<size_t>(1, options_.max_pending);
  options_.max_pending_bytes = std::max<size_t>(1, options_.max_pending_bytes);
  options_.timeout_ns = std::max<dp::TimeNs>(1, options_.timeout_ns);
  pending_.reserve(options_.max_pending);
  completed_.reserve(options_.max_pending);
}

size_t Reassembler::buffered_fragments() const {
  size_t n = 0;
  for (const auto& [k, p] : pending_) n += p.received;
  return n;
}

void Reassembler::Drop(absl::flat_hash_map<Key, Pending>::iterator it, bool evicted) {
  Pending& p = it->second;
  ++(evicted ? counters_.evicted : counters_.timed_out);
  counters_.discarded_fragments += p.received;
  pending_bytes_ -= p.bytes;
  order_.erase(p.seq);
  pending_.erase(it);
}

size_t Reassembler::Expire(dp::TimeNs now) {
  size_t n = 0;
  // Arrival order is first-fragment order, and first_ns is non-decreasing
  // in it as long as time does not go backwards: stop at the first young one.
  while (!order_.empty()) {
    auto it = pending_.find(order_.begin()->second);
    if (now - it->second.first_ns < options_.timeout_ns) break;
    Drop(it, /*evicted=*/false);
    ++n;
  }
  return n;
}

void Reassembler::Clear() {
  while (!order_.empty()) Drop(pending_.find(order_.begin()->second), /*evicted=*/true);
}

void Reassembler::RememberCompleted(const Key& k) {
  if (!completed_.insert(k).second) return;
  completed_order_.push_back(k);
  while (completed_order_.size() > options_.max_pending) {
    completed_.erase(completed_order_.front());
    completed_order_.pop_front();
  }
}

std::vector<float> Reassembler::Concat(const Pending& p) {
  size_t bytes = 0;
  for (const auto& f : p.frags) bytes += f.size();
  std::vector<float> v(bytes / 4);
  size_t at = 0;
  for (const auto& f : p.frags) {
    std::memcpy(reinterpret_cast<uint8_t*>(v.data()) + at, f.data(), f.size());
    at += f.size();
  }
  return v;
}

FragmentOutcome Reassembler::Add(const FragIn& f, std::span<const uint8_t> payload, dp::TimeNs now,
                                 Pending* done) {
  ++counters_.fragments;
  Expire(now);
  const auto len = static_cast<uint32_t>(payload.size());
  const bool last = f.frag_index + 1 == f.frag_count;
  if (completed_.contains(f.key)) {
    ++counters_.duplicates;
    return FragmentOutcome::kDuplicate;
  }
  if (payload.size() > options_.max_pending_bytes) {
    ++counters_.too_large;
    return FragmentOutcome::kTooLarge;
  }
  auto it = pending_.find(f.key);
  if (it == pending_.end()) {
    if (f.frag_count == 1) {  // fast path: nothing to buffer
      done->frag_count = 1;
      done->cluster_id = f.cluster_id;
      done->worker_id = f.worker_id;
      done->id = f.id;
      done->received = 1;
      done->frags.assign(1, std::vector<uint8_t>(payload.begin(), payload.end()));
      done->meta.assign(1, f.meta);
      ++counters_.completed;
      ++counters_.completed_fragments;
      RememberCompleted(f.key);
      return FragmentOutcome::kCompleted;
    }
    // Room: evict the oldest until one more vector and this payload fit.
    while (!order_.empty() && (pending_.size() >= options_.max_pending ||
                               pending_bytes_ + payload.size() > options_.max_pending_bytes)) {
      Drop(pending_.find(order_.begin()->second), /*evicted=*/true);
    }
    Pending p;
    p.seq = next_seq_++;
    p.first_ns = now;
    p.frag_count = f.frag_count;
    p.cluster_id = f.cluster_id;
    p.worker_id = f.worker_id;
    p.id = f.id;
    p.frags.resize(f.frag_count);
    p.meta.resize(f.frag_count);
    order_.emplace(p.seq, f.key);
    it = pending_.emplace(f.key, std::move(p)).first;
  } else {
    Pending& p = it->second;
    // Consistency with what is buffered. Non-last fragments all have one
    // length (the sender's stride); the last is no longer than it.
    bool ok = p.frag_count == f.frag_count && p.cluster_id == f.cluster_id;
    if (ok && !p.frags[f.frag_index].empty()) {
      ++counters_.duplicates;
      return FragmentOutcome::kDuplicate;
    }
    if (ok && !last && p.stride != 0 && len != p.stride) ok = false;
    if (ok && !last && p.last_len != 0 && p.last_len > len) ok = false;
    if (ok && last && p.stride != 0 && len > p.stride) ok = false;
    if (!ok) {
      ++counters_.inconsistent;
      return FragmentOutcome::kInconsistent;
    }
    // Room for the bytes: evict other (older) vectors, never this one.
    while (pending_bytes_ + payload.size() > options_.max_pending_bytes) {
      auto oldest = order_.begin();
      if (oldest->first == p.seq) {
        if (std::next(oldest) == order_.end()) break;
        oldest = std::next(oldest);
      }
      Drop(pending_.find(oldest->second), /*evicted=*/true);
    }
    if (pending_bytes_ + payload.size() > options_.max_pending_bytes) {
      // This vector alone outgrows the budget: give it up.
      Drop(it, /*evicted=*/true);
      ++counters_.too_large;
      return FragmentOutcome::kTooLarge;
    }
  }
  Pending& p = it->second;
  if (last) {
    p.last_len = len;
  } else {
    p.stride = len;
  }
  p.frags[f.frag_index].assign(payload.begin(), payload.end());
  p.meta[f.frag_index] = f.meta;
  p.bytes += payload.size();
  pending_bytes_ += payload.size();
  ++p.received;
  if (p.received < p.frag_count) return FragmentOutcome::kBuffered;
  *done = std::move(p);
  pending_bytes_ -= done->bytes;
  order_.erase(done->seq);
  pending_.erase(it);
  ++counters_.completed;
  counters_.completed_fragments += done->received;
  RememberCompleted(f.key);
  return FragmentOutcome::kCompleted;
}

FragmentOutcome Reassembler::AddUpdate(const UpdateHeader& h, std::span<const uint8_t> payload,
                                       dp::TimeNs now, AssembledUpdate* out) {
  FragIn f{};
  f.key = Key{1, (uint64_t{h.worker_id} << 32) | h.update_id};
  f.cluster_id = h.cluster_id;
  f.frag_index = h.frag_index;
  f.frag_count = h.frag_count;
  f.worker_id = h.worker_id;
  f.id = h.update_id;
  f.meta = FragMeta{h.merged_count, h.model_version, h.gen_time_ns};
  Pending done;
  const FragmentOutcome r = Add(f, payload, now, &done);
  if (r != FragmentOutcome::kCompleted) return r;
  out->cluster_id = done.cluster_id;
  out->worker_id = done.worker_id;
  out->update_id = done.id;
  out->model_version = 0;
  out->gen_time_ns = 0;
  out->merged_count = std::numeric_limits<uint32_t>::max();
  out->fragment_merged_counts.resize(done.frag_count);
  for (size_t i = 0; i < done.meta.size(); ++i) {
    const FragMeta& m = done.meta[i];
    out->model_version = std::max(out->model_version, m.model_version);
    out->gen_time_ns = std::max(out->gen_time_ns, m.gen_time_ns);
    out->merged_count = std::min(out->merged_count, m.merged_count);
    out->fragment_merged_counts[i] = m.merged_count;
  }
  out->values = Concat(done);
  return r;
}

FragmentOutcome Reassembler::AddModel(const ModelHeader& h, std::span<const uint8_t> payload,
                                      dp::TimeNs now, AssembledModel* out) {
  FragIn f{};
  f.key = Key{3, h.model_version};
  // A model's cluster is its destination, not part of its identity: a
  // version sent to one cluster and to all is the same vector.
  f.cluster_id = 0;
  f.frag_index = h.frag_index;
  f.frag_count = h.frag_count;
  f.id = h.model_version;
  f.meta = FragMeta{1, h.model_version, h.gen_time_ns};
  Pending done;
  const FragmentOutcome r = Add(f, payload, now, &done);
  if (r != FragmentOutcome::kCompleted) return r;
  out->cluster_id = h.cluster_id;
  out->model_version = done.id;
  out->gen_time_ns = 0;
  for (const FragMeta& m : done.meta) out->gen_time_ns = std::max(out->gen_time_ns, m.gen_time_ns);
  out->values = Concat(done);
  return r;
}

}  // namespace inca::olaf
