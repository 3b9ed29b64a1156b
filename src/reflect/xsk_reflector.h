// An AF_XDP UDP reflector: the measurement issue 16 asks for ("AF_XDP
// measured on this path, adopted only where it wins"). It does what
// udp-forwarder does without --forward targets (every datagram back to its
// sender) below the kernel's UDP stack: an XDP socket on one queue of one
// interface (libxdp's default program redirects the queue's frames to it),
// each IPv4 UDP frame for the port reflected in place (Ethernet and IP
// addresses and UDP ports swapped, UDP checksum cleared) and sent from the
// same UMEM frame: fill -> rx -> tx -> completion -> fill, no copy in user
// space. Frames that are not IPv4 UDP for the port are dropped and counted.
//
// Copy mode (XDP_COPY): veth, the testbed's links, has no zero-copy. One
// buffer per frame (no XDP multi-buffer in Debian 12's libxdp), so frames
// larger than a UMEM frame less the kernel's headroom (about 3.8 KB) never
// reach it: the benchmark runs it at a 1,500-byte MTU. No ARP either:
// the testbed's static neighbour entries stand in for it.
//
// Built only with libxdp (INCA_HAVE_LIBXDP); `udp-forwarder --io xdp
// --interface IF` runs it; scripts/bench-xdp.py measures it against the
// socket forwarders (docs/performance-log.md, "AF_XDP"). Needs root (or
// CAP_NET_ADMIN and CAP_BPF).
//
// Threading as UdpForwarder: Run() on one thread; Stop() (async-signal-
// safe) and counters() from any.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "reflect/udp_forwarder.h"

namespace inca::reflect {

// True when this build has AF_XDP (libxdp).
bool XskAvailable();

struct XskConfig {
  std::string interface;  // the device whose receive queue is taken over
  uint32_t queue = 0;
  uint16_t port = 0;       // UDP destination port reflected; 0: any
  uint32_t frames = 4096;  // UMEM frames of 4 KiB, a power of two in [64, 65536]
  uint32_t batch = 64;     // descriptors per pass, 1..1024
  // Attach mode of libxdp's program: "native" (the driver's XDP hook),
  // "skb" (generic XDP) or "auto" (native, else skb).
  std::string mode = "auto";
};

// Reflects one Ethernet frame in place if it is an IPv4 UDP datagram for
// `port` (0: any): Ethernet and IPv4 addresses and UDP ports swapped, UDP
// checksum cleared (IPv4 allows none, and a frame from a local socket on
// veth carries only a partial one). False, frame untouched, otherwise
// (short, not IPv4, not UDP, a fragment, lengths that disagree).
bool ReflectUdp4Frame(std::span<uint8_t> frame, uint16_t port);

class XskReflector {
 public:
  // InvalidArgument for a bad config; Unimplemented without libxdp;
  // Unavailable when the interface, the program or the socket cannot be
  // set up (with the kernel's reason).
  static absl::StatusOr<std::unique_ptr<XskReflector>> Create(const XskConfig& config);
  ~XskReflector();

  absl::Status Run();
  void Stop() noexcept { stop_.store(true); }
  UdpForwarderCounters counters() const;
  // "native" or "skb": how the program was attached.
  const std::string& attach_mode() const { return attach_mode_; }

 private:
  struct Rings;
  XskReflector(const XskConfig& config, std::unique_ptr<Rings> rings, std::string attach_mode);

  const XskConfig config_;
  std::unique_ptr<Rings> rings_;
  std::string attach_mode_;
  UdpForwarderCounters live_;
  std::atomic<bool> stop_{false};
  mutable absl::Mutex mu_;
  UdpForwarderCounters snapshot_ ABSL_GUARDED_BY(mu_);
};

}  // namespace inca::reflect
