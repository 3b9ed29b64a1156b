// Splits a UDP GSO frame into the datagrams a NIC would put on the wire.
//
// The testbed's veths and bridge carry a sender's UDP GSO packet (up to 64
// KB: seven 8,972-byte CAIS datagrams) whole, so a delay line that delayed
// it as one frame would jitter and reorder seven datagrams as one: a wire
// never does. inca-linkdelay splits such frames on arrival and delays each
// datagram on its own. Pure: no sockets, no clock.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/functional/function_ref.h"
#include "absl/types/span.h"

namespace inca::linkdelay {

// A frame as a packet socket with PACKET_VNET_HDR reads it: the 10-byte
// virtio_net_hdr, then Ethernet, IPv4 or IPv6, UDP and the payload.
inline constexpr size_t kVirtioNetHdrBytes = 10;

// When `frame` is a UDP GSO frame (gso_type UDP_L4, payload longer than
// gso_size), writes each datagram as a frame of its own through `emit`
// (vnet header without GSO, the checksum still left to the kernel as the
// original asked; Ethernet copied; IPv4 total length, id (+1 per segment)
// and header checksum, or IPv6 payload length; UDP length and its
// pseudo-header checksum adjusted, as the kernel's __udp_gso_segment does)
// and returns the number written. Returns 0, writing nothing, for any
// other frame: it is to be forwarded as it is.
//
// `emit(len)` returns a buffer of at least `len` bytes to write the frame
// into; it is called once per datagram, in order.
size_t SplitUdpGso(absl::Span<const uint8_t> frame, absl::FunctionRef<uint8_t*(size_t)> emit);

}  // namespace inca::linkdelay
