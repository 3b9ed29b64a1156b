// The worker side of OLAF (docs/design/olaf-transport.md).
//
//  WorkerCore          pure logic, time and randomness injected: decides with
//                      SendControl whether a generated gradient is sent,
//                      fragments it into UPDATE datagrams (gen_time = now),
//                      and handles ACK (feedback) and MODEL (reassembled into
//                      the latest complete model) datagrams.
//  OlafWorkerEndpoint  WorkerCore on a UDP socket (Linux, IPv4 or IPv6) talking to an
//                      OLAF switch or directly to the PS: inca/olaf/worker_endpoint.h.
//
// Neither class is thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "inca/dataplane/program.h"
#include "inca/olaf/fragment.h"
#include "inca/olaf/ps_clock.h"
#include "inca/olaf/send_control.h"
#include "inca/wire/olaf.h"

namespace inca::olaf {

// Whose clock an UPDATE's gen_time_ns is on (docs/design/olaf-core.md,
// "Clocks across hosts").
enum class WorkerClock : uint8_t {
  // This process's CLOCK_MONOTONIC: right only when the switch and the PS
  // share the host (the simulator; single-host tests).
  kLocal,
  // The PS's, estimated from the MODELs received (PsClockEstimate); flagged
  // PS_CLOCK. Before the first MODEL: kGenTimeUnknown (age 0 on arrival).
  kPs,
};

struct WorkerOptions {
  // Written into every UPDATE. kUnassignedCluster lets the first OLAF
  // switch's cluster table decide (it keys by UDP source port); without a
  // switch set it explicitly.
  uint16_t cluster_id = kUnassignedCluster;
  // Written into every UPDATE. kUnstampedWorker (0) lets the first OLAF
  // switch stamp the Worker_ID from the 5-tuple; the simulator, which has no
  // 5-tuples, gives each worker its own.
  uint32_t worker_id = kUnstampedWorker;
  SendControlOptions send_control;
  uint32_t max_payload_bytes = kDefaultUpdatePayloadBytes;  // per UPDATE datagram
  // Model reassembly (a few versions in flight at most).
  ReassemblerOptions model_reassembly{
      .max_pending = 4, .max_pending_bytes = size_t{256} << 20, .timeout_ns = 1'000'000'000};
  // > 0: a complete MODEL of another length is rejected (models_rejected)
  // and does not replace the latest model.
  size_t model_elements = 0;
  uint64_t seed = 1;             // of the send-control draws (mt19937_64)
  uint32_t first_update_id = 0;  // update_id of the first sent update
  WorkerClock clock = WorkerClock::kLocal;

  absl::Status Validate() const;
};

struct WorkerCounters {
  uint64_t generated = 0;   // Generate() calls
  uint64_t sent = 0;        // updates sent (the worker updates of the loss rate)
  uint64_t suppressed = 0;  // not sent: send control said no
  uint64_t datagrams_sent = 0;
  uint64_t datagrams_rx = 0;
  uint64_t malformed = 0;
  uint64_t wrong_type = 0;  // UPDATE received by a worker
  uint64_t acks_rx = 0;
  uint64_t model_fragments_rx = 0;
  uint64_t models_rx = 0;        // complete models newer than the previous one
  uint64_t stale_models = 0;     // fragments of versions <= the latest complete one
  uint64_t models_rejected = 0;  // complete, but not model_elements long
  ReassemblyCounters model_reassembly;
};

// What Generate() decided.
struct WorkerSend {
  bool sent = false;
  double probability = 1;                       // P_send at that moment
  uint32_t update_id = 0;                       // when sent
  std::vector<std::vector<uint8_t>> datagrams;  // UPDATE fragments, in order
};

enum class WorkerInbound : uint8_t {
  kMalformed,      // not a valid OLAF datagram
  kWrongType,      // an UPDATE
  kAck,            // feedback taken
  kModelFragment,  // buffered, duplicate or rejected model fragment
  kModelComplete,  // a newer model is available
  kStaleModel,     // a fragment of a version not newer than the latest
};
std::string_view ToString(WorkerInbound w);

class WorkerCore {
 public:
  static absl::StatusOr<std::unique_ptr<WorkerCore>> Create(const WorkerOptions& options);

  // A gradient computed on `model_version`, generated at `now`: sent with
  // probability P_send(now) (a draw from the seeded generator). Empty
  // `grad` or one over the fragment limit: InvalidArgument (counted as
  // neither sent nor suppressed).
  absl::StatusOr<WorkerSend> Generate(std::span<const float> grad, uint32_t model_version,
                                      dp::TimeNs now);
  // The same with the uniform [0, 1) draw given (tests, co-simulation).
  absl::StatusOr<WorkerSend> GenerateWithDraw(std::span<const float> grad, uint32_t model_version,
                                              dp::TimeNs now, double uniform01);
  // An ACK or MODEL datagram received at `now`.
  WorkerInbound OnDatagram(std::span<const uint8_t> datagram, dp::TimeNs now);

  // The newest complete model; nullptr before the first.
  const AssembledModel* latest_model() const {
    return latest_model_.has_value() ? &*latest_model_ : nullptr;
  }
  const std::optional<AckHeader>& last_ack() const { return last_ack_; }
  const SendControl& send_control() const { return send_control_; }
  const PsClockEstimate& ps_clock() const { return ps_clock_; }
  const WorkerCounters& counters() const;
  const WorkerOptions& options() const { return options_; }

 private:
  WorkerCore(const WorkerOptions& options, Fragmenter fragmenter, SendControl send_control);

  WorkerOptions options_;
  Fragmenter fragmenter_;
  SendControl send_control_;
  Reassembler models_;
  std::mt19937_64 rng_;
  uint32_t next_update_id_;
  std::optional<AckHeader> last_ack_;
  std::optional<AssembledModel> latest_model_;
  PsClockEstimate ps_clock_;
  mutable WorkerCounters counters_;
};

}  // namespace inca::olaf
