// The parameter-server (PS) side of OLAF (docs/design/olaf-transport.md).
//
//  PsCore          pure logic, time injected: parses UPDATE datagrams,
//                  reassembles fragments, applies whole updates through a
//                  pluggable function, keeps the model version and the
//                  per-cluster AoM at the PS, and builds the ACK for every
//                  UPDATE datagram and MODEL datagrams (fragmented).
//  OlafPsEndpoint  PsCore on a UDP socket (Linux, IPv4 or IPv6): replies go to the
//                  datagram's source (the switch, or the worker without one):
//                  inca/olaf/ps_endpoint.h.
//
// Two apply granularities (PsOptions::granularity):
//  kWholeUpdate  (default) fragments are reassembled; the apply function sees
//                whole vectors. A fragment lost or merged away at a switch
//                makes its update incomplete (timed out, counted).
//  kFragment     every UPDATE fragment is applied on arrival as a partial
//                gradient of elements [element_offset, +values.size()),
//                element_offset = frag_index · update_payload_bytes / 4 (the
//                senders' fragment size; a non-last fragment of another
//                length is rejected as inconsistent). This is what
//                docs/design/olaf-core.md asks of a PS behind merging
//                switches for multi-fragment updates.
//
// AoM at the PS: a delivery is an *applied* update (kWholeUpdate: when its
// last fragment arrives, with gen_time_ns = max over fragments; kFragment:
// every applied fragment). Buffered fragments do not count.
//
// Update loss (needs the workers' counters): loss = 1 − Σ_applied
// merged_count / Σ_workers updates sent; PsCounters::worker_updates_applied
// is the numerator (merged_count = min over an update's fragments).
//
// Neither class is thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "inca/dataplane/program.h"
#include "inca/olaf/aom_tracker.h"
#include "inca/olaf/fragment.h"
#include "inca/wire/olaf.h"

namespace inca::olaf {

// An update as handed to the apply function.
struct AppliedUpdate {
  uint16_t cluster_id = 0;
  uint32_t worker_id = 0;  // of the (first-queued) worker, see fragment.h
  uint32_t update_id = 0;
  uint32_t model_version = 0;  // the version the gradient was computed on (max over fragments)
  uint64_t gen_time_ns = 0;    // max over fragments, worker clock
  uint32_t merged_count = 0;   // worker updates fully carried (min over fragments)
  std::vector<uint32_t> fragment_merged_counts;
  std::vector<float> values;
  dp::TimeNs applied_ns = 0;       // arrival of the completing fragment (PS clock)
  uint32_t new_model_version = 0;  // the PS's version after this update
  // kFragment granularity: which part of the gradient `values` is. For
  // whole updates: offset 0, frag_index 0, frag_count 1.
  size_t element_offset = 0;
  uint16_t frag_index = 0;
  uint16_t frag_count = 1;
};

enum class ApplyGranularity : uint8_t { kWholeUpdate, kFragment };

enum class ModelPolicy : uint8_t {
  kNone,              // MODELs only through BuildModel / BroadcastModel
  kToUpdatedCluster,  // after every model_every-th applied update: the model,
                      // to the cluster whose update was applied
  // kFragment granularity: as kToUpdatedCluster, but only applied *last*
  // fragments (frag_index == frag_count - 1) count, so a cluster gets about
  // one model per update it sends rather than one per fragment. With
  // kWholeUpdate every update is its own last fragment (= kToUpdatedCluster).
  kToUpdatedClusterOnLastFragment,
};

struct PsOptions {
  // Called once per whole update, in arrival order of completing fragments.
  std::function<void(const AppliedUpdate&)> apply;
  // The current parameters, for the kToUpdatedCluster* policies (required then).
  std::function<std::span<const float>()> model_params;
  ModelPolicy model_policy = ModelPolicy::kNone;
  uint32_t model_every = 1;  // >= 1 (counted in applied updates / fragments / last fragments)
  ApplyGranularity granularity = ApplyGranularity::kWholeUpdate;
  // kFragment: the payload bytes of every non-last UPDATE fragment (the
  // workers' max_payload_bytes).
  uint32_t update_payload_bytes = kDefaultUpdatePayloadBytes;
  // kFragment, > 0: the gradient's length in f32. A fragment whose
  // frag_count or length does not fit a vector of this size (a worker with
  // another model), or that holds a non-finite value, is rejected as
  // kInconsistent (counted in fragments_inconsistent) and never applied.
  size_t expected_elements = 0;
  uint32_t initial_model_version = 0;
  uint32_t model_max_payload_bytes = kDefaultModelPayloadBytes;
  ReassemblerOptions reassembly;
  size_t max_clusters = AomTracker::kDefaultMaxClusters;

  absl::Status Validate() const;
};

enum class PsOutcome : uint8_t {
  kMalformed,          // not a valid OLAF datagram (parse_error says why); no ACK
  kWrongType,          // an ACK or MODEL sent to the PS; no ACK
  kBuffered,           // a fragment of an incomplete update
  kApplied,            // completed and applied an update
  kDuplicate,          // fragment seen already
  kInconsistent,       // contradicts the buffered fragments of its update
  kTooLarge,           // cannot be buffered (reassembly byte budget)
  kClustersExhausted,  // a new cluster beyond max_clusters: not applied
  kFragmentApplied,    // kFragment granularity: the fragment was applied
};
std::string_view ToString(PsOutcome o);

struct PsResult {
  PsOutcome outcome = PsOutcome::kMalformed;
  OlafParseError parse_error = OlafParseError::kOk;
  uint16_t cluster_id = kUnassignedCluster;
  std::vector<uint8_t> ack;                  // 28 bytes for every UPDATE that parsed, else empty
  std::vector<std::vector<uint8_t>> models;  // MODEL datagrams due to the policy
};

struct PsCounters {
  uint64_t datagrams_rx = 0;
  uint64_t malformed = 0;
  std::array<uint64_t, kOlafParseErrorCount> parse_errors{};
  uint64_t wrong_type = 0;
  uint64_t fragments_rx = 0;            // UPDATE datagrams that parsed
  uint64_t updates_applied = 0;         // whole updates, or fragments (kFragment)
  uint64_t worker_updates_applied = 0;  // Σ merged_count of applied updates
  uint64_t fragments_inconsistent = 0;  // kFragment: wrong length for the stride
  uint64_t clusters_exhausted = 0;
  uint64_t acks_sent = 0;
  uint64_t models_built = 0;           // model vectors fragmented (BuildModel + policy)
  uint64_t model_datagrams_built = 0;  // their fragments
  // Bytes (UDP payload) of the UPDATE datagrams that parsed, of the ACKs
  // built and of the MODEL fragments built: the OLAF paper's cost of
  // feedback, ACK and MODEL traffic against update traffic.
  uint64_t update_bytes_rx = 0;
  uint64_t ack_bytes = 0;
  uint64_t model_bytes_built = 0;
  uint64_t model_triggers = 0;    // applications the model policy counted
  ReassemblyCounters reassembly;  // duplicates, inconsistent, incomplete, ...

  uint64_t updates_incomplete() const { return reassembly.incomplete(); }
};

struct PsClusterStats {
  uint16_t cluster_id = 0;
  uint64_t fragments_rx = 0;
  uint64_t updates_applied = 0;
  uint64_t worker_updates_applied = 0;  // Σ merged_count
  std::optional<AomStats> aom;          // at the PS; nullopt before the first applied update
};

class PsCore {
 public:
  static absl::StatusOr<std::unique_ptr<PsCore>> Create(PsOptions options);

  // Handles one datagram received at `now`. An UPDATE with worker_id 0
  // (no switch stamped it) is treated as coming from
  // `worker_id_if_unstamped` (the endpoint passes WorkerIdOf(its flow)).
  PsResult OnDatagram(std::span<const uint8_t> datagram, dp::TimeNs now,
                      uint32_t worker_id_if_unstamped = 0);
  // Lets time pass: times out partial updates.
  void Advance(dp::TimeNs now);

  // MODEL datagrams carrying `params` as the current model_version, for
  // `cluster` (kAllClusters = every cluster), gen_time = now.
  absl::StatusOr<std::vector<std::vector<uint8_t>>> BuildModel(std::span<const float> params,
                                                               uint16_t cluster, dp::TimeNs now);

  uint32_t model_version() const { return model_version_; }
  const PsCounters& counters() const;
  std::optional<PsClusterStats> cluster(uint16_t cluster_id, dp::TimeNs now) const;
  std::vector<uint16_t> cluster_ids() const;  // clusters seen, ascending
  const AomTracker& aom() const { return aom_; }
  // Restarts the AoM windows (e.g. after a warm-up).
  void ResetAomWindow(dp::TimeNs now) { aom_.ResetWindow(now); }
  const PsOptions& options() const { return options_; }

 private:
  struct ClusterCounts {
    uint64_t fragments_rx = 0, updates_applied = 0, worker_updates_applied = 0;
  };
  PsCore(PsOptions options, Fragmenter model_fragmenter);
  std::vector<uint8_t> MakeAck(const UpdateHeader& h, dp::TimeNs now) const;
  // Version bump, counters, AoM, apply, model policy.
  void Apply(AppliedUpdate& a, uint16_t cluster, dp::TimeNs now, PsResult& r);

  PsOptions options_;
  Fragmenter model_fragmenter_;
  Reassembler reassembler_;
  AomTracker aom_;
  absl::flat_hash_map<uint16_t, ClusterCounts> clusters_;
  uint32_t model_version_;
  mutable PsCounters counters_;
};

}  // namespace inca::olaf
