#include "inca/olaf/ps.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace inca::olaf {

std::string_view ToString(PsOutcome o) {
  switch (o) {
    case PsOutcome::kMalformed: return "malformed";
    case PsOutcome::kWrongType: return "wrong_type";
    case PsOutcome::kBuffered: return "buffered";
    case PsOutcome::kApplied: return "applied";
    case PsOutcome::kDuplicate: return "duplicate";
    case PsOutcome::kInconsistent: return "inconsistent";
    case PsOutcome::kTooLarge: return "too_large";
    case PsOutcome::kClustersExhausted: return "clusters_exhausted";
    case PsOutcome::kFragmentApplied: return "fragment_applied";
  }
  return "unknown";
}

absl::Status PsOptions::Validate() const {
  if (model_policy != ModelPolicy::kNone && !model_params) {
    return absl::InvalidArgumentError(
        "ps: model_policy to_updated_cluster needs model_params (the current parameters)");
  }
  if (model_every < 1) return absl::InvalidArgumentError("ps: model_every must be >= 1");
  if (max_clusters < 1) return absl::InvalidArgumentError("ps: max_clusters must be >= 1");
  if (absl::Status s = reassembly.Validate(); !s.ok()) return s;
  if (granularity == ApplyGranularity::kFragment) {
    if (absl::Status s = Fragmenter::Create(update_payload_bytes).status(); !s.ok()) return s;
  }
  return Fragmenter::Create(model_max_payload_bytes).status();
}

absl::StatusOr<std::unique_ptr<PsCore>> PsCore::Create(PsOptions options) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  auto frag = Fragmenter::Create(options.model_max_payload_bytes);
  if (!frag.ok()) return frag.status();
  return std::unique_ptr<PsCore>(new PsCore(std::move(options), *frag));
}

PsCore::PsCore(PsOptions options, Fragmenter model_fragmenter)
    : options_(std::move(options)),
      model_fragmenter_(model_fragmenter),
      reassembler_(options_.reassembly),
      aom_(options_.max_clusters),
      model_version_(options_.initial_model_version) {
  clusters_.reserve(options_.max_clusters);
}

const PsCounters& PsCore::counters() const {
  counters_.reassembly = reassembler_.counters();
  return counters_;
}

std::vector<uint8_t> PsCore::MakeAck(const UpdateHeader& h, dp::TimeNs now) const {
  AckHeader a;
  a.queue_util = 0;  // switches on the way back stamp their queue state
  a.active_clusters = 0;
  a.worker_id = h.worker_id;
  a.update_id = h.update_id;
  a.model_version = model_version_;
  a.cluster_id = h.cluster_id;
  if (auto age = aom_.Aom(h.cluster_id, now); age.has_value()) {
    const dp::TimeNs us = *age / 1000;
    a.aom_us = static_cast<uint32_t>(std::min<dp::TimeNs>(us, kAomUnknown - 1));
  } else {
    a.aom_us = kAomUnknown;
  }
  std::vector<uint8_t> d(kOlafAckBytes);
  SerializeAck(a, d);
  return d;
}

PsResult PsCore::OnDatagram(std::span<const uint8_t> datagram, dp::TimeNs now,
                            uint32_t worker_id_if_unstamped) {
  PsResult r;
  ++counters_.datagrams_rx;
  OlafPacket p;
  r.parse_error = ParseOlaf(datagram, &p);
  if (r.parse_error != OlafParseError::kOk) {
    ++counters_.malformed;
    ++counters_.parse_errors[static_cast<size_t>(r.parse_error)];
    r.outcome = PsOutcome::kMalformed;
    return r;
  }
  if (p.type != OlafType::kUpdate) {
    ++counters_.wrong_type;
    r.outcome = PsOutcome::kWrongType;
    return r;
  }
  UpdateHeader h = p.update;
  if (h.worker_id == kUnstampedWorker) h.worker_id = worker_id_if_unstamped;
  r.cluster_id = h.cluster_id;
  ++counters_.fragments_rx;
  counters_.update_bytes_rx += datagram.size();

  auto cit = clusters_.find(h.cluster_id);
  if (cit == clusters_.end()) {
    if (clusters_.size() >= options_.max_clusters) {
      ++counters_.clusters_exhausted;
      r.outcome = PsOutcome::kClustersExhausted;
      r.ack = MakeAck(h, now);
      ++counters_.acks_sent;
      counters_.ack_bytes += r.ack.size();
      return r;
    }
    cit = clusters_.emplace(h.cluster_id, ClusterCounts{}).first;
  }
  ++cit->second.fragments_rx;

  if (options_.granularity == ApplyGranularity::kFragment) {
    const size_t stride = options_.update_payload_bytes / 4;
    const bool last = h.frag_index + 1 == h.frag_count;
    const size_t n = p.payload.size() / 4;
    bool fits = (!last && n == stride) || (last && n <= stride);
    if (fits && options_.expected_elements > 0) {
      const size_t count = (options_.expected_elements + stride - 1) / stride;
      fits = h.frag_count == count &&
             (!last || n == options_.expected_elements - (count - 1) * stride);
      for (size_t i = 0; fits && i < n; ++i) {
        float v;
        std::memcpy(&v, p.payload.data() + 4 * i, 4);
        fits = std::isfinite(v);
      }
    }
    if (!fits) {
      ++counters_.fragments_inconsistent;
      r.outcome = PsOutcome::kInconsistent;
    } else {
      AppliedUpdate a;
      a.cluster_id = h.cluster_id;
      a.worker_id = h.worker_id;
      a.update_id = h.update_id;
      a.model_version = h.model_version;
      a.gen_time_ns = h.gen_time_ns;
      a.merged_count = h.merged_count;
      a.fragment_merged_counts.assign(1, h.merged_count);
      a.values.resize(n);
      std::memcpy(a.values.data(), p.payload.data(), n * 4);
      a.element_offset = size_t{h.frag_index} * stride;
      a.frag_index = h.frag_index;
      a.frag_count = h.frag_count;
      Apply(a, h.cluster_id, now, r);
      r.outcome = PsOutcome::kFragmentApplied;
    }
  } else {
    AssembledUpdate u;
    const FragmentOutcome fo = reassembler_.AddUpdate(h, p.payload, now, &u);
    switch (fo) {
      case FragmentOutcome::kBuffered: r.outcome = PsOutcome::kBuffered; break;
      case FragmentOutcome::kDuplicate: r.outcome = PsOutcome::kDuplicate; break;
      case FragmentOutcome::kInconsistent: r.outcome = PsOutcome::kInconsistent; break;
      case FragmentOutcome::kTooLarge: r.outcome = PsOutcome::kTooLarge; break;
      case FragmentOutcome::kCompleted: r.outcome = PsOutcome::kApplied; break;
    }
    if (fo == FragmentOutcome::kCompleted) {
      AppliedUpdate a;
      a.cluster_id = u.cluster_id;
      a.worker_id = u.worker_id;
      a.update_id = u.update_id;
      a.model_version = u.model_version;
      a.gen_time_ns = u.gen_time_ns;
      a.merged_count = u.merged_count;
      a.fragment_merged_counts = std::move(u.fragment_merged_counts);
      a.values = std::move(u.values);
      Apply(a, h.cluster_id, now, r);
    }
  }
  r.ack = MakeAck(h, now);
  ++counters_.acks_sent;
  counters_.ack_bytes += r.ack.size();
  return r;
}

void PsCore::Apply(AppliedUpdate& a, uint16_t cluster, dp::TimeNs now, PsResult& r) {
  ++model_version_;
  ++counters_.updates_applied;
  counters_.worker_updates_applied += a.merged_count;
  ClusterCounts& c = clusters_[cluster];  // exists: OnDatagram admitted the cluster
  ++c.updates_applied;
  c.worker_updates_applied += a.merged_count;
  // Cluster state exists, so the tracker has room (same bound).
  // A time later than now (kGenTimeUnknown: the worker has not heard the
  // PS's clock yet) counts as now.
  const uint64_t now_u = static_cast<uint64_t>(std::max<dp::TimeNs>(0, now));
  aom_.OnDelivery(cluster, static_cast<dp::TimeNs>(std::min(a.gen_time_ns, now_u)), now);
  a.applied_ns = now;
  a.new_model_version = model_version_;
  if (options_.apply) options_.apply(a);
  const bool counts = options_.model_policy == ModelPolicy::kToUpdatedCluster ||
                      (options_.model_policy == ModelPolicy::kToUpdatedClusterOnLastFragment &&
                       a.frag_index + 1 == a.frag_count);
  if (counts && ++counters_.model_triggers % options_.model_every == 0) {
    auto models = BuildModel(options_.model_params(), cluster, now);
    if (models.ok()) r.models = *std::move(models);
  }
}

void PsCore::Advance(dp::TimeNs now) {
  reassembler_.Expire(now);
}

absl::StatusOr<std::vector<std::vector<uint8_t>>> PsCore::BuildModel(std::span<const float> params,
                                                                     uint16_t cluster,
                                                                     dp::TimeNs now) {
  ModelHeader h;
  h.cluster_id = cluster;
  h.model_version = model_version_;
  h.gen_time_ns = static_cast<uint64_t>(std::max<dp::TimeNs>(0, now));
  auto out = model_fragmenter_.Model(h, params);
  if (out.ok()) {
    ++counters_.models_built;
    counters_.model_datagrams_built += out->size();
    for (const auto& d : *out) counters_.model_bytes_built += d.size();
  }
  return out;
}

std::vector<uint16_t> PsCore::cluster_ids() const {
  std::vector<uint16_t> ids;
  ids.reserve(clusters_.size());
  for (const auto& [id, c] : clusters_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

std::optional<PsClusterStats> PsCore::cluster(uint16_t cluster_id, dp::TimeNs now) const {
  auto it = clusters_.find(cluster_id);
  if (it == clusters_.end()) return std::nullopt;
  PsClusterStats s;
  s.cluster_id = cluster_id;
  s.fragments_rx = it->second.fragments_rx;
  s.updates_applied = it->second.updates_applied;
  s.worker_updates_applied = it->second.worker_updates_applied;
  s.aom = aom_.Stats(cluster_id, now);
  return s;
}

}  // namespace inca::olaf
