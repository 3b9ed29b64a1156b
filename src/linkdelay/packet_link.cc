#include "linkdelay/packet_link.h"

#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "linkdelay/gso_split.h"

namespace inca::linkdelay {

namespace {

// struct virtio_net_hdr (linux/virtio_net.h, which does not compile as C++: a
// member is named `class`): 10 bytes, passed through untouched.
constexpr size_t kVnetHdrBytes = 10;
constexpr size_t kFrameBytes = kVnetHdrBytes + 65536 + 64;  // any GSO frame
constexpr size_t kMinFrameBytes = kVnetHdrBytes + ETH_HLEN;
constexpr size_t kSmall = 1024;
constexpr size_t kMedium = 16384;  // a 9000-byte MTU frame and its header
constexpr size_t kOverflow = kFrameBytes - kMedium;
constexpr size_t kPoolLimit = 1024;  // spare buffers kept per size
constexpr size_t kControlBytes = CMSG_SPACE(sizeof(timespec));
constexpr int64_t kMaxWaitNs = 100'000'000;  // Stop() is seen within this
#ifndef PACKET_IGNORE_OUTGOING
#define PACKET_IGNORE_OUTGOING 23
#endif

int64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

absl::StatusOr<int> OpenPort(const std::string& ifname) {
  const unsigned index = if_nametoindex(ifname.c_str());
  if (index == 0) {
    return absl::UnavailableError(absl::StrCat("interface ", ifname, ": ", std::strerror(errno)));
  }
  const int fd = ::socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, htons(ETH_P_ALL));
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("packet socket: ", std::strerror(errno), " (needs CAP_NET_RAW)"));
  }
  auto fail = [&](const char* what) {
    const int e = errno;
    ::close(fd);
    return absl::UnavailableError(absl::StrCat(ifname, ": ", what, ": ", std::strerror(e)));
  };
  const int one = 1;
  if (setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof(one)) != 0)
    return fail("PACKET_VNET_HDR");
  // Our own sends on this port are not frames to forward.
  if (setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one)) != 0)
    return fail("PACKET_IGNORE_OUTGOING");
  if (setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one)) != 0)
    return fail("SO_TIMESTAMPNS");
  // Room for a burst at line rate; FORCE needs CAP_NET_ADMIN, plain is capped.
  const int bytes = 32 << 20;
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof(bytes)) != 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof(bytes)) != 0)
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
  sockaddr_ll sll = {};
  sll.sll_family = AF_PACKET;
  sll.sll_protocol = htons(ETH_P_ALL);
  sll.sll_ifindex = static_cast<int>(index);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sll), sizeof(sll)) != 0) return fail("bind");
  return fd;
}

}  // namespace

std::string LinkCounters::ToJson() const {
  return absl::StrCat("{\"host_port\":\"", host_port, "\",\"up\":", up.ToJson(),
                      ",\"down\":", down.ToJson(), ",\"send_failed_up\":", send_failed_up,
                      ",\"send_failed_down\":", send_failed_down, ",\"runt_frames\":", runt_frames,
                      ",\"gso_frames_split\":", gso_frames_split, "}");
}

std::string PacketLinkCounters::ToJson() const {
  std::string out = "{\"links\":[";
  for (size_t k = 0; k < links.size(); ++k) absl::StrAppend(&out, k ? "," : "", links[k].ToJson());
  return out + "]}";
}

absl::StatusOr<std::unique_ptr<PacketLink>> PacketLink::Create(const PacketLinkConfig& config) {
  for (const auto& [name, spec] : {std::pair{"up", &config.up}, std::pair{"down", &config.down}}) {
    if (absl::Status s = spec->Validate(); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": ", s.message()));
    }
  }
  if (config.batch < 1 || config.batch > 1024) {
    return absl::InvalidArgumentError(absl::StrCat("batch ", config.batch, " must be 1..1024"));
  }
  if (config.resolution_ns < 0 || config.resolution_ns > 10'000'000) {
    return absl::InvalidArgumentError("resolution must be 0..10 ms");
  }
  if (config.links.empty() || config.links.size() > 256) {
    return absl::InvalidArgumentError("give 1..256 links");
  }
  std::vector<std::unique_ptr<Link>> links;
  auto close_all = [&] {
    for (auto& l : links) {
      ::close(l->host_fd);
      ::close(l->switch_fd);
    }
  };
  for (size_t k = 0; k < config.links.size(); ++k) {
    const LinkPorts& p = config.links[k];
    if (p.host_port.empty() || p.switch_port.empty() || p.host_port == p.switch_port) {
      close_all();
      return absl::InvalidArgumentError(
          absl::StrCat("link ", k, ": host and switch ports must be two different interfaces"));
    }
    auto host = OpenPort(p.host_port);
    if (!host.ok()) {
      close_all();
      return host.status();
    }
    auto sw = OpenPort(p.switch_port);
    if (!sw.ok()) {
      ::close(*host);
      close_all();
      return sw.status();
    }
    links.push_back(std::make_unique<Link>(config, k, *host, *sw));
  }
  return std::unique_ptr<PacketLink>(new PacketLink(config, std::move(links)));
}

PacketLink::Link::Link(const PacketLinkConfig& c, size_t k, int host, int sw)
    : host_fd(host),
      switch_fd(sw),
      up(c.up, c.limits, c.seed + k),
      down(c.down, c.limits, (c.seed + k) ^ 0x9e3779b97f4a7c15ull) {
  live.host_port = c.links[k].host_port;
}

PacketLink::PacketLink(const PacketLinkConfig& config, std::vector<std::unique_ptr<Link>> links)
    : config_(config),
      links_(std::move(links)),
      rx_iov_(2 * size_t{config.batch}),
      rx_msgs_(config.batch),
      rx_control_(config.batch * kControlBytes),
      tx_iov_(config.batch),
      tx_msgs_(config.batch) {
  for (uint32_t i = 0; i < config.batch; ++i) {
    rx_frames_.push_back(Frame::Allocate(kMedium));
    overflow_.push_back(std::make_unique_for_overwrite<uint8_t[]>(kOverflow));
  }
  tx_frames_.reserve(config.batch);
}

Frame PacketLink::Take(size_t cap) {
  std::vector<Frame>* pool = cap == kSmall    ? &small_pool_
                             : cap == kMedium ? &medium_pool_
                                              : nullptr;
  if (pool == nullptr || pool->empty()) return Frame::Allocate(cap);
  Frame f = std::move(pool->back());
  pool->pop_back();
  return f;
}

void PacketLink::GiveBack(Frame f) {
  std::vector<Frame>* pool = f.cap == kSmall    ? &small_pool_
                             : f.cap == kMedium ? &medium_pool_
                                                : nullptr;
  if (pool != nullptr && f.data != nullptr && pool->size() < kPoolLimit) {
    f.len = 0;
    pool->push_back(std::move(f));
  }
}

PacketLink::~PacketLink() {
  for (auto& l : links_) {
    ::close(l->host_fd);
    ::close(l->switch_fd);
  }
}

PacketLinkCounters PacketLink::counters() const {
  absl::MutexLock lock(&mu_);
  return snapshot_;
}

bool PacketLink::Drain(int fd, DelayLine& line, LinkCounters& counters, int64_t now_ns,
                       int64_t realtime_offset_ns) {
  for (size_t i = 0; i < config_.batch; ++i) {
    rx_iov_[2 * i] = {rx_frames_[i].data.get(), kMedium};
    rx_iov_[2 * i + 1] = {overflow_[i].get(), kOverflow};
    rx_msgs_[i] = {};
    rx_msgs_[i].msg_hdr.msg_iov = &rx_iov_[2 * i];
    rx_msgs_[i].msg_hdr.msg_iovlen = 2;
    rx_msgs_[i].msg_hdr.msg_control = rx_control_.data() + i * kControlBytes;
    rx_msgs_[i].msg_hdr.msg_controllen = kControlBytes;
  }
  const int n = ::recvmmsg(fd, rx_msgs_.data(), config_.batch, MSG_DONTWAIT, nullptr);
  if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
    const size_t len = rx_msgs_[i].msg_len;
    if (len < kMinFrameBytes) {
      ++counters.runt_frames;
      continue;
    }
    Frame f;
    if (len <= kSmall) {
      f = Take(kSmall);
      std::memcpy(f.data.get(), rx_frames_[i].data.get(), len);
    } else if (len <= kMedium) {
      f = std::move(rx_frames_[i]);
      rx_frames_[i] = Take(kMedium);
    } else {
      f = Frame::Allocate(len);
      std::memcpy(f.data.get(), rx_frames_[i].data.get(), kMedium);
      std::memcpy(f.data.get() + kMedium, overflow_[i].get(), len - kMedium);
    }
    f.len = len;
    // The delay runs from the kernel's arrival time (CLOCK_REALTIME), not
    // from when this loop got round to reading it.
    int64_t arrived = now_ns;
    for (cmsghdr* c = CMSG_FIRSTHDR(&rx_msgs_[i].msg_hdr); c != nullptr;
         c = CMSG_NXTHDR(&rx_msgs_[i].msg_hdr, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
        timespec ts;
        std::memcpy(&ts, CMSG_DATA(c), sizeof(ts));
        const int64_t rt = int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
        arrived = std::clamp(rt - realtime_offset_ns, now_ns - kMaxWaitNs, now_ns);
      }
    }
    // A GSO frame goes on as the datagrams a wire would carry, each
    // delayed on its own.
    segments_.clear();
    const size_t n_seg = SplitUdpGso(f.bytes(), [&](size_t seg_len) {
      segments_.push_back(seg_len <= kSmall    ? Take(kSmall)
                          : seg_len <= kMedium ? Take(kMedium)
                                               : Frame::Allocate(seg_len));
      segments_.back().len = seg_len;
      return segments_.back().data.get();
    });
    if (n_seg == 0) {
      if (!line.Push(arrived, f)) GiveBack(std::move(f));
      continue;
    }
    ++counters.gso_frames_split;
    GiveBack(std::move(f));
    for (Frame& s : segments_) {
      if (!line.Push(arrived, s)) GiveBack(std::move(s));
    }
  }
  return true;
}

void PacketLink::Flush(int out_fd, uint64_t& send_failed) {
  const size_t count = tx_frames_.size();
  for (size_t k = 0; k < count; ++k) {
    tx_iov_[k] = {tx_frames_[k].data.get(), tx_frames_[k].len};
    tx_msgs_[k] = {};
    tx_msgs_[k].msg_hdr.msg_iov = &tx_iov_[k];
    tx_msgs_[k].msg_hdr.msg_iovlen = 1;
  }
  size_t done = 0;
  while (done < count) {
    const int n = ::sendmmsg(out_fd, tx_msgs_.data() + done, static_cast<unsigned>(count - done),
                             MSG_DONTWAIT);
    if (n <= 0) {
      ++send_failed;  // a full queue behind the port (its tbf) or no buffer: this frame
      ++done;
      continue;
    }
    done += static_cast<size_t>(n);
  }
  for (Frame& f : tx_frames_) GiveBack(std::move(f));
  tx_frames_.clear();
}

void PacketLink::Release(DelayLine& line, int out_fd, uint64_t& send_failed, int64_t now_ns) {
  // Everything due within half the resolution leaves now.
  const int64_t until = now_ns + config_.resolution_ns / 2;
  while (line.ReleaseDue(until, config_.batch, tx_frames_) > 0) Flush(out_fd, send_failed);
}

absl::Status PacketLink::Run() {
  std::vector<pollfd> fds;
  for (const auto& l : links_) {
    fds.push_back({l->host_fd, POLLIN, 0});
    fds.push_back({l->switch_fd, POLLIN, 0});
  }
  while (!stop_.load()) {
    int64_t now = MonotonicNs();
    int64_t next_due = now + kMaxWaitNs;
    for (const auto& l : links_) {
      for (const DelayLine* line : {&l->up, &l->down}) {
        if (auto due = line->NextDueNs()) next_due = std::min(next_due, *due);
      }
    }
    const int64_t wait = std::max<int64_t>(0, next_due - now);
    const timespec ts = {static_cast<time_t>(wait / 1'000'000'000),
                         static_cast<long>(wait % 1'000'000'000)};
    const int r = ::ppoll(fds.data(), fds.size(), &ts, nullptr);
    if (r < 0 && errno != EINTR) {
      return absl::InternalError(absl::StrCat("ppoll: ", std::strerror(errno)));
    }
    now = MonotonicNs();
    timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    const int64_t realtime_offset = int64_t{rt.tv_sec} * 1'000'000'000 + rt.tv_nsec - now;
    for (size_t k = 0; r > 0 && k < links_.size(); ++k) {
      Link& l = *links_[k];
      for (int side = 0; side < 2; ++side) {
        const pollfd& p = fds[2 * k + static_cast<size_t>(side)];
        const LinkPorts& ports = config_.links[k];
        const std::string& name = side == 0 ? ports.host_port : ports.switch_port;
        if ((p.revents & (POLLERR | POLLNVAL)) != 0) {
          return absl::UnavailableError(absl::StrCat(name, ": the interface went away"));
        }
        if ((p.revents & POLLIN) != 0 &&
            !Drain(p.fd, side == 0 ? l.up : l.down, l.live, now, realtime_offset)) {
          return absl::InternalError(absl::StrCat(name, ": ", std::strerror(errno)));
        }
      }
    }
    for (auto& l : links_) {
      Release(l->up, l->switch_fd, l->live.send_failed_up, now);
      Release(l->down, l->host_fd, l->live.send_failed_down, now);
      l->live.up = l->up.counters();
      l->live.down = l->down.counters();
    }
    {
      absl::MutexLock lock(&mu_);
      snapshot_.links.clear();
      for (const auto& l : links_) snapshot_.links.push_back(l->live);
    }
    // Woken by arrivals: let more gather before the next read (their
    // kernel timestamps keep their delays exact), unless one is due first.
    if (r > 0 && config_.resolution_ns > 0) {
      const int64_t nap = std::min(config_.resolution_ns, next_due - MonotonicNs());
      if (nap > 0) {
        const timespec n = {0, static_cast<long>(nap)};
        nanosleep(&n, nullptr);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace inca::linkdelay
