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
  if (chunk_size < 4 || chunk_size % 4 != 0 || chunk_size > 65472) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunk_size ", chunk_size,
        " must be a multiple of 4 between 4 and 65472 (one UDP datagram with the 20-byte "
        "CAIS header); 8952 fits a 9000-byte jumbo frame, 1452 a 1500-byte MTU"));
  }
  if (max_pending_chunks < 1 || max_pending_chunks > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_pending_chunks ", max_pending_chunks, " must be 1..65535"));
  }
  if (io != "gso" && io != "mmsg") {
    return absl::InvalidArgumentError(absl::StrCat("io '", io, "' must be gso or mmsg"));
  }
  if (switch_port < -1 || switch_port >= dp::kMaxPorts) {
    return absl::InvalidArgumentError(
        absl::StrCat("switch_port ", switch_port, " must be -1 (any) or 0..", dp::kMaxPorts - 1));
  }
  if (retransmit_timeout_ms < 1 || max_retransmit_timeout_ms < retransmit_timeout_ms ||
      switch_timeout_ms < 1 || join_timeout_ms < 0 || rejoin_interval_ms < 1 ||
      host_timeout_ms <= switch_timeout_ms) {
    return absl::InvalidArgumentError(
        "timeouts: need 1 <= retransmit_timeout_ms <= max_retransmit_timeout_ms, "
        "switch_timeout_ms >= 1, join_timeout_ms >= 0, rejoin_interval_ms >= 1 and "
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
  if (const char* off = std::getenv("INCA_OFFLOAD")) o.offload = std::string(off) != "0";
  if (const char* io = std::getenv("INCA_IO")) o.io = io;
  if (const char* req = std::getenv("INCA_REQUIRE_SWITCH")) {
    const std::string v = req;
    if (v == "1" || v == "true") {
      o.require_switch = true;
    } else if (v == "0" || v == "false" || v.empty()) {
      o.require_switch = false;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("INCA_REQUIRE_SWITCH='", v, "': expected 1 or 0"));
    }
  }
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

}  // namespace inca
