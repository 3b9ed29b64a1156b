// Communicator: options (validation, the environment) and Create(). The
// implementation is in communicator_impl.h (the progress thread, the
// switch/host decision) and communicator_recovery.cc (the host recovery
// protocol). Design: docs/design/cais-client.md.
#include "inca/client/communicator.h"

#include <cstdlib>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/communicator_impl.h"
#include "client/settings.h"
#include "inca/cais/port_mask.h"
#include "inca/dataplane/program.h"

namespace inca {

absl::Status CommunicatorOptions::Validate() const {
  if (world_size < 1 || world_size > cais::kMaxGroupMembers) {
    return absl::InvalidArgumentError(
        absl::StrCat("world_size ", world_size, " must be between 1 and ", cais::kMaxGroupMembers));
  }
  if (rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " must be in [0, world_size=", world_size, ")"));
  }
  // Each setting's range, as client/settings.cc declares it.
  if (absl::Status s = settings::ValidateAll(client::ClientSettings(), *this); !s.ok()) return s;
  if (switch_port < -1 || switch_port >= dp::kMaxPorts) {
    return absl::InvalidArgumentError(
        absl::StrCat("switch_port ", switch_port, " must be -1 (any) or 0..", dp::kMaxPorts - 1));
  }
  // What no single setting's range can say.
  if (max_retransmit_timeout_ms < retransmit_timeout_ms || host_timeout_ms <= switch_timeout_ms) {
    return absl::InvalidArgumentError(
        "timeouts: need retransmit_timeout_ms <= max_retransmit_timeout_ms and "
        "host_timeout_ms > switch_timeout_ms");
  }
  return absl::OkStatus();
}

absl::StatusOr<CommunicatorOptions> OptionsFromEnvironment(CommunicatorOptions o) {
  auto get_int = [](const char* name, int* out) -> absl::Status {
    const char* v = std::getenv(name);
    if (v == nullptr) return absl::OkStatus();
    if (!absl::SimpleAtoi(v, out)) {
      return absl::InvalidArgumentError(absl::StrCat(name, "='", v, "' is not an integer"));
    }
    return absl::OkStatus();
  };
  if (auto s = get_int("RANK", &o.rank); !s.ok()) return s;
  if (auto s = get_int("WORLD_SIZE", &o.world_size); !s.ok()) return s;
  const char* addr = std::getenv("MASTER_ADDR");
  const char* port = std::getenv("MASTER_PORT");
  if (addr != nullptr || port != nullptr) {
    // inca's store listens one port above torch's, so both can run.
    int p = 29500;
    if (port != nullptr && !absl::SimpleAtoi(port, &p)) {
      return absl::InvalidArgumentError(absl::StrCat("MASTER_PORT='", port, "' is not a port"));
    }
    o.store_address = absl::StrCat(addr ? addr : "127.0.0.1", ":", p + 1);
  }
  if (const char* sw = std::getenv("INCA_SWITCH")) {
    o.switch_address = std::string(sw) == "none" ? "" : sw;
  }
  // The settings that declare a variable (INCA_IO, INCA_OFFLOAD,
  // INCA_REQUIRE_SWITCH: src/client/settings.cc).
  if (auto s = client::ApplyClientEnvironment(&o); !s.ok()) return s;
  if (auto s = o.Validate(); !s.ok()) return s;
  return o;
}

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::Create(
    const CommunicatorOptions& options) {
  if (auto s = options.Validate(); !s.ok()) return s;
  auto c = std::make_unique<client_internal::CommunicatorImpl>(options);
  if (auto s = c->Init(); !s.ok()) return s;
  return std::unique_ptr<Communicator>(std::move(c));
}

namespace client_internal {

// In all and for its size class as the switch estimates it.
void CommunicatorImpl::CountHostReason(const SwitchOp& whole) {
  const auto why = static_cast<size_t>(host_reason_);
  const int size_class =
      wire::SizeClass(client::OffloadEstimate(whole, o_.chunk_size, o_.world_size));
  absl::MutexLock lock(&stats_mu_);
  ++stats_.host_reasons[why];
  ++stats_.host_by_class[size_class][why];
}

}  // namespace client_internal

}  // namespace inca
