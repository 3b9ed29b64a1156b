// PacketLink: host links' delay lines over AF_PACKET, all links of a
// testbed in one event loop (one process waking once for every link's due
// frames costs far less CPU than a process per link). For each link, frames
// that arrive on its `host_port` (from the host) are held by its "up" line
// and sent on its `switch_port`; frames from `switch_port` are held by the
// "down" line and sent on `host_port`. Everything the kernel hands over
// passes, whatever the protocol: the sockets carry a virtio-net header
// (PACKET_VNET_HDR), so GSO packets and pending checksums cross unchanged.
//
// Threading as UdpForwarder: Run() on one thread; Stop() (async-signal-safe)
// and counters() from any. Every frame is accounted for: held, sent, or
// dropped with a counted reason (the line was full, the send failed, or the
// frame was too short to be one).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <sys/socket.h>
#include <sys/uio.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "linkdelay/delay_line.h"

namespace inca::linkdelay {

struct LinkPorts {
  std::string host_port;    // interface facing the host
  std::string switch_port;  // interface facing the switch
};

struct PacketLinkConfig {
  std::vector<LinkPorts> links;  // 1..256
  DelaySpec up;                  // host -> switch, every link
  DelaySpec down;                // switch -> host, every link
  DelayLineLimits limits;        // each direction of each link
  uint64_t seed = 1;             // link k draws from seed + k
  uint32_t batch = 64;           // frames read or sent per socket per call, 1..1024
  // Frames due within half of this of now leave together (one sendmmsg),
  // and after a wake-up by arrivals the loop naps this long so that more
  // are read per call: what the delays lose in precision (+- half of it),
  // the host gains in CPU.
  int64_t resolution_ns = 50'000;
};

struct LinkCounters {
  std::string host_port;
  DelayLineCounters up, down;
  uint64_t send_failed_up = 0, send_failed_down = 0;
  uint64_t runt_frames = 0;  // shorter than a virtio-net header and an Ethernet header
  // UDP GSO frames split into their datagrams on arrival (gso_split.h), so
  // that each is delayed on its own, as on a wire.
  uint64_t gso_frames_split = 0;
  std::string ToJson() const;
};

struct PacketLinkCounters {
  std::vector<LinkCounters> links;
  std::string ToJson() const;  // {"links":[...]}
};

class PacketLink {
 public:
  // InvalidArgument for a bad spec or batch; Unavailable when an interface
  // is missing or a packet socket cannot be opened (needs CAP_NET_RAW).
  static absl::StatusOr<std::unique_ptr<PacketLink>> Create(const PacketLinkConfig& config);
  ~PacketLink();

  absl::Status Run();
  void Stop() noexcept { stop_.store(true); }
  PacketLinkCounters counters() const;

 private:
  struct Link {
    Link(const PacketLinkConfig& c, size_t k, int host, int sw);
    int host_fd, switch_fd;
    DelayLine up, down;
    LinkCounters live;
  };
  PacketLink(const PacketLinkConfig& config, std::vector<std::unique_ptr<Link>> links);
  // Reads up to a batch from `fd` into `line` (one recvmmsg); false on a
  // socket error.
  bool Drain(int fd, DelayLine& line, LinkCounters& counters, int64_t now_ns,
             int64_t realtime_offset_ns);
  // Sends what is due on `out_fd`, a batch per sendmmsg.
  void Release(DelayLine& line, int out_fd, uint64_t& send_failed, int64_t now_ns);
  void Flush(int out_fd, uint64_t& send_failed);
  // Buffers: frames up to kSmall bytes are copied into small ones; larger
  // ones up to kMedium stay in the buffer they were received into (no
  // copy); GSO frames beyond it get one of their own size.
  Frame Take(size_t cap);
  std::vector<Frame> segments_;  // a split GSO frame's datagrams, reused
  void GiveBack(Frame f);

  PacketLinkConfig config_;
  std::vector<std::unique_ptr<Link>> links_;
  std::vector<Frame> rx_frames_;                      // a medium buffer per slot
  std::vector<std::unique_ptr<uint8_t[]>> overflow_;  // the rest of a GSO frame
  std::vector<struct iovec> rx_iov_;                  // two per slot
  std::vector<struct mmsghdr> rx_msgs_;
  std::vector<uint8_t> rx_control_;  // an SCM_TIMESTAMPNS per slot
  std::vector<Frame> tx_frames_;
  std::vector<struct iovec> tx_iov_;
  std::vector<struct mmsghdr> tx_msgs_;
  std::vector<Frame> small_pool_, medium_pool_;  // bounded
  std::atomic<bool> stop_{false};
  mutable absl::Mutex mu_;
  PacketLinkCounters snapshot_ ABSL_GUARDED_BY(mu_);
};

}  // namespace inca::linkdelay
