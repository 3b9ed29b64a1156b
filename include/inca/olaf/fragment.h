// Fragmentation of OLAF updates and models larger than one datagram, and
// their reassembly (docs/design/olaf-transport.md, "Fragments").
//
//  Fragmenter   splits N >= 1 f32 values into frag_count datagrams of at
//               most max_payload_bytes payload each: every fragment but the
//               last is full (elements_per_fragment() values), the last holds
//               the rest. All other header fields are copied.
//  Reassembler  collects fragments into whole vectors. UPDATE fragments are
//               keyed by (worker_id, update_id), MODEL fragments by
//               model_version. Bounded: at most max_pending partial vectors
//               and max_pending_bytes buffered payload (the oldest is
//               evicted and counted); a partial vector older than timeout_ns
//               is dropped as incomplete; duplicates are ignored; fragments
//               that contradict what is buffered (frag_count, lengths,
//               cluster) are rejected. Every fragment handed in is counted in
//               exactly one ReassemblyCounters bucket.
//
// Merged fragments: an OLAF switch merges fragment i of one worker's update
// into a queued fragment i of another worker of the same cluster, and the
// merged fragment keeps the queued entry's (worker_id, update_id). An
// assembled update may therefore mix contributions: fragment_merged_counts
// holds merged_count per fragment, merged_count their minimum (the number of
// worker updates the whole vector fully carries); gen_time_ns and
// model_version are the maximum over the fragments (as the switch's merge
// rule). An update whose fragment was merged away never completes and is
// counted incomplete.
//
// Pure logic, time injected; not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "inca/dataplane/program.h"
#include "inca/wire/olaf.h"

namespace inca::olaf {

// Payload that fits a 9000-byte MTU: 9000 − 20 IPv4 − 8 UDP − header.
inline constexpr uint32_t kDefaultUpdatePayloadBytes = 9000 - 20 - 8 - kOlafUpdateHeaderBytes;
inline constexpr uint32_t kDefaultModelPayloadBytes = 9000 - 20 - 8 - kOlafModelHeaderBytes;
inline constexpr size_t kMaxFragments = 0xFFFF;  // frag_count is 16 bits
// Largest UDP payload over IPv4 (65535 − 20 − 8).
inline constexpr size_t kMaxOlafDatagramBytes = 65507;

class Fragmenter {
 public:
  // max_payload_bytes: a multiple of 4, >= 4, and a datagram of header +
  // payload must fit kMaxOlafDatagramBytes. InvalidArgument otherwise.
  static absl::StatusOr<Fragmenter> Create(uint32_t max_payload_bytes = kDefaultUpdatePayloadBytes);

  uint32_t max_payload_bytes() const { return max_payload_bytes_; }
  size_t elements_per_fragment() const { return max_payload_bytes_ / 4; }
  // ceil(elements / elements_per_fragment()); 0 for 0 elements.
  size_t FragmentCount(size_t elements) const;
  // The most values one update/model can carry (kMaxFragments fragments).
  size_t MaxElements() const { return kMaxFragments * elements_per_fragment(); }

  // Calls emit(datagram) once per fragment, in frag_index order. The span is
  // valid during the call only (one buffer is reused). header.frag_index,
  // frag_count and payload_len are overwritten. InvalidArgument for 0 values
  // or more than MaxElements(); nothing is emitted then.
  absl::Status ForEachUpdate(const UpdateHeader& header, std::span<const float> values,
                             absl::FunctionRef<void(std::span<const uint8_t>)> emit) const;
  absl::Status ForEachModel(const ModelHeader& header, std::span<const float> values,
                            absl::FunctionRef<void(std::span<const uint8_t>)> emit) const;
  // The same, collected.
  absl::StatusOr<std::vector<std::vector<uint8_t>>> Update(const UpdateHeader& header,
                                                           std::span<const float> values) const;
  absl::StatusOr<std::vector<std::vector<uint8_t>>> Model(const ModelHeader& header,
                                                          std::span<const float> values) const;

 private:
  explicit Fragmenter(uint32_t max_payload_bytes) : max_payload_bytes_(max_payload_bytes) {}
  uint32_t max_payload_bytes_;
};

struct ReassemblerOptions {
  size_t max_pending = 64;                       // partial vectors held at once (>= 1)
  size_t max_pending_bytes = size_t{256} << 20;  // payload bytes buffered in them (>= 1)
  dp::TimeNs timeout_ns = 1'000'000'000;         // since the first fragment (> 0)

  absl::Status Validate() const;
};

// One bucket per fragment handed to Add*(): conservation
//   fragments == completed_fragments + buffered_fragments (in pending vectors)
//              + discarded_fragments (in vectors timed out or evicted)
//              + duplicates + inconsistent + too_large.
struct ReassemblyCounters {
  uint64_t fragments = 0;            // Add*() calls
  uint64_t completed = 0;            // whole vectors handed out
  uint64_t completed_fragments = 0;  // fragments in them
  uint64_t duplicates = 0;           // fragment already buffered, or of a vector just completed
  uint64_t inconsistent = 0;         // contradicts the buffered fragments of its vector
  uint64_t too_large = 0;            // alone more than max_pending_bytes
  uint64_t timed_out = 0;            // partial vectors dropped after timeout_ns
  uint64_t evicted = 0;              // partial vectors dropped for room (oldest first)
  uint64_t discarded_fragments = 0;  // fragments in timed-out or evicted vectors

  uint64_t incomplete() const { return timed_out + evicted; }
};

enum class FragmentOutcome : uint8_t {
  kBuffered,      // kept; its vector is still incomplete
  kCompleted,     // completed a vector (*out is set)
  kDuplicate,     // ignored
  kInconsistent,  // rejected
  kTooLarge,      // rejected: cannot fit max_pending_bytes
};
std::string_view ToString(FragmentOutcome o);

struct AssembledUpdate {
  uint16_t cluster_id = 0;
  uint32_t worker_id = 0;
  uint32_t update_id = 0;
  uint32_t model_version = 0;  // max over fragments
  uint64_t gen_time_ns = 0;    // max over fragments
  uint32_t merged_count = 0;   // min over fragments
  std::vector<uint32_t> fragment_merged_counts;
  std::vector<float> values;
};

struct AssembledModel {
  uint16_t cluster_id = 0;  // of the fragment that completed it
  uint32_t model_version = 0;
  uint64_t gen_time_ns = 0;  // max over fragments
  std::vector<float> values;
};

class Reassembler {
 public:
  // Options must validate (ReassemblerOptions::Validate); invalid values are
  // clamped to the nearest valid one.
  explicit Reassembler(const ReassemblerOptions& o = {});

  // `payload` is the fragment's payload (header.payload_len bytes, a
  // multiple of 4, >= 4: what ParseOlaf accepts). Expires timed-out vectors
  // first. On kCompleted, *out is overwritten.
  FragmentOutcome AddUpdate(const UpdateHeader& h, std::span<const uint8_t> payload, dp::TimeNs now,
                            AssembledUpdate* out);
  FragmentOutcome AddModel(const ModelHeader& h, std::span<const uint8_t> payload, dp::TimeNs now,
                           AssembledModel* out);

  // Drops partial vectors whose first fragment arrived at or before
  // now − timeout_ns. Returns how many.
  size_t Expire(dp::TimeNs now);
  // Drops everything pending (counted as evicted).
  void Clear();

  size_t pending() const { return pending_.size(); }
  size_t pending_bytes() const { return pending_bytes_; }
  size_t buffered_fragments() const;
  const ReassemblyCounters& counters() const { return counters_; }
  const ReassemblerOptions& options() const { return options_; }

 private:
  struct Key {
    uint8_t kind = 0;  // 1 update, 3 model
    uint64_t id = 0;
    friend bool operator==(const Key&, const Key&) = default;
    template <typename H>
    friend H AbslHashValue(H h, const Key& k) {
      return H::combine(std::move(h), k.kind, k.id);
    }
  };
  struct FragMeta {
    uint32_t merged_count = 0;
    uint32_t model_version = 0;
    uint64_t gen_time_ns = 0;
  };
  struct Pending {
    uint64_t seq = 0;  // arrival order, for eviction
    dp::TimeNs first_ns = 0;
    uint16_t frag_count = 0;
    uint16_t cluster_id = 0;
    uint32_t worker_id = 0;
    uint32_t id = 0;  // update_id or model_version
    uint32_t received = 0;
    size_t bytes = 0;
    uint32_t stride = 0;  // length of a non-last fragment, 0 until one arrived
    uint32_t last_len = 0;
    uint32_t shortest_non_last = 0;
    std::vector<std::vector<uint8_t>> frags;  // empty = missing
    std::vector<FragMeta> meta;
  };
  struct FragIn {
    Key key;
    uint16_t cluster_id, frag_index, frag_count;
    uint32_t worker_id, id;
    FragMeta meta;
  };

  // Returns the completed Pending via *done on kCompleted.
  FragmentOutcome Add(const FragIn& f, std::span<const uint8_t> payload, dp::TimeNs now,
                      Pending* done);
  void Drop(absl::flat_hash_map<Key, Pending>::iterator it, bool evicted);
  void RememberCompleted(const Key& k);
  static std::vector<float> Concat(const Pending& p);

  ReassemblerOptions options_;
  absl::flat_hash_map<Key, Pending> pending_;
  std::map<uint64_t, Key> order_;  // seq -> key, oldest first
  uint64_t next_seq_ = 0;
  size_t pending_bytes_ = 0;
  // Recently completed multi-fragment vectors (bounded by max_pending), so
  // a late duplicate does not start a vector that can never complete.
  std::deque<Key> completed_order_;
  absl::flat_hash_set<Key> completed_;
  ReassemblyCounters counters_;
};

}  // namespace inca::olaf
