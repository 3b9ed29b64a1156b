// The reducer's 20-byte notices (docs/protocol.md): the chunk's header
// with these flags and no payload. Shared by reducer.cc and uplink.cc.
#pragma once

#include <cstdint>

#include "inca/dataplane/program.h"
#include "inca/wire/cais.h"

namespace inca::cais::internal {

namespace flags = wire::cais_flags;
inline constexpr uint8_t kFallbackNotice = flags::kFallback | flags::kResult;
inline constexpr uint8_t kDeclinedNotice = flags::kFallback | flags::kResult | flags::kDeclined;
inline constexpr uint8_t kAckNotice = flags::kResult | flags::kAck;
inline constexpr uint8_t kPendingNotice = flags::kResult | flags::kPending;

inline void SendNotice(const wire::CaisHeader& h, uint8_t notice, uint8_t block, dp::PortId port,
                       dp::PacketSink& out) {
  wire::CaisHeader n = h;
  n.flags = notice;
  n.payload_len = 0;
  n.block = block;
  uint8_t buf[wire::kCaisHeaderBytes];
  wire::SerializeCaisHeader(n, buf);
  out.Emit(port, buf);
}

}  // namespace inca::cais::internal
