#include "inca/olaf/worker.h"

#include <algorithm>

namespace inca::olaf {

std::string_view ToString(WorkerInbound w) {
  switch (w) {
    case WorkerInbound::kMalformed: return "malformed";
    case WorkerInbound::kWrongType: return "wrong_type";
    case WorkerInbound::kAck: return "ack";
    case WorkerInbound::kModelFragment: return "model_fragment";
    case WorkerInbound::kModelComplete: return "model_complete";
    case WorkerInbound::kStaleModel: return "stale_model";
  }
  return "unknown";
}

absl::Status WorkerOptions::Validate() const {
  if (absl::Status s = send_control.Validate(); !s.ok()) return s;
  if (absl::Status s = model_reassembly.Validate(); !s.ok()) return s;
  return Fragmenter::Create(max_payload_bytes).status();
}

absl::StatusOr<std::unique_ptr<WorkerCore>> WorkerCore::Create(const WorkerOptions& options) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  auto frag = Fragmenter::Create(options.max_payload_bytes);
  if (!frag.ok()) return frag.status();
  auto sc = SendControl::Create(options.send_control);
  if (!sc.ok()) return sc.status();
  return std::unique_ptr<WorkerCore>(new WorkerCore(options, *frag, *sc));
}

WorkerCore::WorkerCore(const WorkerOptions& options, Fragmenter fragmenter,
                       SendControl send_control)
    : options_(options),
      fragmenter_(fragmenter),
      send_control_(send_control),
      models_(options.model_reassembly),
      rng_(options.seed),
      next_update_id_(options.first_update_id) {}

const WorkerCounters& WorkerCore::counters() const {
  counters_.model_reassembly = models_.counters();
  return counters_;
}

absl::StatusOr<WorkerSend> WorkerCore::Generate(std::span<const float> grad, uint32_t model_version,
                                                dp::TimeNs now) {
  // generate_canonical: a double in [0, 1) from 53 random bits.
  const double u = std::generate_canonical<double, 53>(rng_);
  return GenerateWithDraw(grad, model_version, now, std::min(u, 0x1.fffffffffffffp-1));
}

absl::StatusOr<WorkerSend> WorkerCore::GenerateWithDraw(std::span<const float> grad,
                                                        uint32_t model_version, dp::TimeNs now,
                                                        double uniform01) {
  if (grad.empty() || grad.size() > fragmenter_.MaxElements()) {
    return absl::InvalidArgumentError("worker: gradient must have 1..MaxElements() values");
  }
  ++counters_.generated;
  WorkerSend w;
  w.probability = send_control_.Probability(now);
  if (!(uniform01 < w.probability)) {
    ++counters_.suppressed;
    return w;
  }
  UpdateHeader h;
  h.cluster_id = options_.cluster_id;
  h.worker_id = options_.worker_id;
  h.model_version = model_version;
  h.gen_time_ns = static_cast<uint64_t>(std::max<dp::TimeNs>(0, now));
  if (options_.clock == WorkerClock::kPs) {
    h.flags |= kUpdateFlagPsClock;
    h.gen_time_ns = ps_clock_.offset() ? ps_clock_.ToPs(now) : kGenTimeUnknown;
  }
  h.merged_count = 1;
  h.update_id = next_update_id_;
  auto frags = fragmenter_.Update(h, grad);
  if (!frags.ok()) return frags.status();
  ++next_update_id_;
  ++counters_.sent;
  counters_.datagrams_sent += frags->size();
  w.sent = true;
  w.update_id = h.update_id;
  w.datagrams = *std::move(frags);
  return w;
}

WorkerInbound WorkerCore::OnDatagram(std::span<const uint8_t> datagram, dp::TimeNs now) {
  ++counters_.datagrams_rx;
  OlafPacket p;
  if (ParseOlaf(datagram, &p) != OlafParseError::kOk) {
    ++counters_.malformed;
    return WorkerInbound::kMalformed;
  }
  switch (p.type) {
    case OlafType::kUpdate: ++counters_.wrong_type; return WorkerInbound::kWrongType;
    case OlafType::kAck:
      ++counters_.acks_rx;
      last_ack_ = p.ack;
      send_control_.OnAck(p.ack, now);
      return WorkerInbound::kAck;
    case OlafType::kModel: break;
  }
  ++counters_.model_fragments_rx;
  ps_clock_.OnPsTime(p.model.gen_time_ns, now);
  models_.Expire(now);
  if (latest_model_.has_value() && p.model.model_version <= latest_model_->model_version) {
    ++counters_.stale_models;
    return WorkerInbound::kStaleModel;
  }
  AssembledModel m;
  if (models_.AddModel(p.model, p.payload, now, &m) != FragmentOutcome::kCompleted) {
    return WorkerInbound::kModelFragment;
  }
  if (options_.model_elements > 0 && m.values.size() != options_.model_elements) {
    ++counters_.models_rejected;
    return WorkerInbound::kModelFragment;
  }
  ++counters_.models_rx;
  latest_model_ = std::move(m);
  return WorkerInbound::kModelComplete;
}

}  // namespace inca::olaf
