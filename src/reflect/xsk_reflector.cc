#include "reflect/xsk_reflector.h"

#include <net/if.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

#ifdef INCA_HAVE_LIBXDP
#include <bpf/libbpf.h>
#include <linux/if_link.h>
#include <xdp/libxdp.h>
#include <xdp/xsk.h>
#endif

namespace inca::reflect {

namespace {
constexpr size_t kEthBytes = 14;
constexpr uint16_t kEtherTypeIpv4 = 0x0800;
constexpr uint8_t kProtoUdp = 17;

uint16_t Load16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] << 8 | p[1]);
}

// What Create refuses before it touches the kernel.
absl::Status Check(const XskConfig& config) {
  if (config.interface.empty() || if_nametoindex(config.interface.c_str()) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--interface '", config.interface, "' is not a device here"));
  }
  if (config.frames < 64 || config.frames > 65536 || (config.frames & (config.frames - 1)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("frames ", config.frames, " is not a power of two in [64, 65536]"));
  }
  if (config.batch < 1 || config.batch > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch ", config.batch, " out of range [1, 1024]"));
  }
  if (config.mode != "auto" && config.mode != "native" && config.mode != "skb") {
    return absl::InvalidArgumentError(
        absl::StrCat("XDP mode '", config.mode, "': use auto, native or skb"));
  }
  return absl::OkStatus();
}
}  // namespace

bool ReflectUdp4Frame(std::span<uint8_t> frame, uint16_t port) {
  if (frame.size() < kEthBytes + 20 + 8 || Load16(&frame[12]) != kEtherTypeIpv4) return false;
  uint8_t* ip = frame.data() + kEthBytes;
  const size_t ihl = size_t{ip[0] & 0x0fu} * 4;
  if ((ip[0] >> 4) != 4 || ihl < 20 || ip[9] != kProtoUdp) return false;
  if ((Load16(&ip[6]) & 0x3fff) != 0) return false;  // a fragment (MF set or an offset)
  const size_t ip_len = Load16(&ip[2]);
  if (ip_len < ihl + 8 || kEthBytes + ip_len > frame.size()) return false;
  uint8_t* udp = ip + ihl;
  if (Load16(&udp[4]) != ip_len - ihl) return false;
  if (port != 0 && Load16(&udp[2]) != port) return false;
  std::swap_ranges(frame.data(), frame.data() + 6, frame.data() + 6);  // MACs
  std::swap_ranges(ip + 12, ip + 16, ip + 16);                         // addresses
  std::swap_ranges(udp, udp + 2, udp + 2);                             // ports
  udp[6] = udp[7] = 0;  // no checksum (the header checksum is unchanged by a swap)
  return true;
}

#ifdef INCA_HAVE_LIBXDP

namespace {
constexpr uint32_t kFrameBytes = XSK_UMEM__DEFAULT_FRAME_SIZE;

// libbpf and libxdp narrate loading on stderr ("No bpffs found", ELF
// sections skipped); what matters comes back as an error code, which
// Create turns into its one line.
int Quiet(enum libbpf_print_level, const char*, va_list) {
  return 0;
}
int QuietXdp(enum libxdp_print_level, const char*, va_list) {
  return 0;
}
}  // namespace

struct XskReflector::Rings {
  void* area = MAP_FAILED;
  size_t area_bytes = 0;
  xsk_umem* umem = nullptr;
  xsk_socket* xsk = nullptr;
  xsk_ring_prod fill{};
  xsk_ring_cons comp{};
  xsk_ring_cons rx{};
  xsk_ring_prod tx{};
  uint32_t tx_outstanding = 0;  // sent, completion not yet reaped
  std::vector<uint64_t> spare;  // frames to give back to the fill ring
  ~Rings() {
    if (xsk != nullptr) xsk_socket__delete(xsk);
    if (umem != nullptr) xsk_umem__delete(umem);
    if (area != MAP_FAILED) munmap(area, area_bytes);
  }
  // Spare frames and reaped completions back to the fill ring.
  void Refill() {
    uint32_t idx = 0;
    const uint32_t done = xsk_ring_cons__peek(&comp, 1024, &idx);
    for (uint32_t k = 0; k < done; ++k) spare.push_back(*xsk_ring_cons__comp_addr(&comp, idx + k));
    if (done > 0) xsk_ring_cons__release(&comp, done);
    tx_outstanding -= std::min(tx_outstanding, done);
    if (spare.empty()) return;
    const auto want = static_cast<uint32_t>(spare.size());
    const uint32_t got = xsk_ring_prod__reserve(&fill, want, &idx);
    for (uint32_t k = 0; k < got; ++k) *xsk_ring_prod__fill_addr(&fill, idx + k) = spare[k];
    if (got > 0) xsk_ring_prod__submit(&fill, got);
    spare.erase(spare.begin(), spare.begin() + got);
  }
  // Asks the kernel to send what the tx ring holds (copy mode sends in
  // this call).
  bool Kick() {
    if (!xsk_ring_prod__needs_wakeup(&tx)) return true;
    if (sendto(xsk_socket__fd(xsk), nullptr, 0, MSG_DONTWAIT, nullptr, 0) >= 0) return true;
    return errno == EAGAIN || errno == EBUSY || errno == ENOBUFS || errno == ENETDOWN;
  }
};

bool XskAvailable() {
  return true;
}

absl::StatusOr<std::unique_ptr<XskReflector>> XskReflector::Create(const XskConfig& config) {
  if (absl::Status bad = Check(config); !bad.ok()) return bad;
  libbpf_set_print(Quiet);
  libxdp_set_print(QuietXdp);
  auto r = std::make_unique<Rings>();
  r->area_bytes = size_t{config.frames} * kFrameBytes;
  r->area =
      mmap(nullptr, r->area_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (r->area == MAP_FAILED) {
    return absl::UnavailableError(absl::StrCat("UMEM: ", std::strerror(errno)));
  }
  // Every frame circulates: fill -> rx -> tx -> completion -> fill.
  const xsk_umem_config uc{.fill_size = config.frames,
                           .comp_size = config.frames,
                           .frame_size = kFrameBytes,
                           .frame_headroom = 0,
                           .flags = 0};
  if (int e = xsk_umem__create(&r->umem, r->area, r->area_bytes, &r->fill, &r->comp, &uc); e) {
    return absl::UnavailableError(absl::StrCat("xsk_umem__create: ", std::strerror(-e)));
  }
  std::string mode;
  int err = 0;
  for (const char* m : {"native", "skb"}) {
    if (config.mode != "auto" && config.mode != m) continue;
    xsk_socket_config sc{};
    sc.rx_size = config.frames / 2;
    sc.tx_size = config.frames / 2;
    sc.xdp_flags = std::strcmp(m, "native") == 0 ? XDP_FLAGS_DRV_MODE : XDP_FLAGS_SKB_MODE;
    sc.bind_flags = XDP_COPY | XDP_USE_NEED_WAKEUP;
    err = xsk_socket__create(&r->xsk, config.interface.c_str(), config.queue, r->umem, &r->rx,
                             &r->tx, &sc);
    if (err == 0) {
      mode = m;
      break;
    }
    r->xsk = nullptr;
  }
  if (mode.empty()) {
    return absl::UnavailableError(absl::StrCat("AF_XDP socket on ", config.interface, " queue ",
                                               config.queue, ": ", std::strerror(-err),
                                               " (root, a kernel with XDP sockets?)"));
  }
  for (uint64_t f = 0; f < config.frames; ++f) r->spare.push_back(f * kFrameBytes);
  r->Refill();
  return std::unique_ptr<XskReflector>(new XskReflector(config, std::move(r), mode));
}

absl::Status XskReflector::Run() {
  Rings& r = *rings_;
  const int fd = xsk_socket__fd(r.xsk);
  while (!stop_.load()) {
    r.Refill();
    uint32_t rx_idx = 0;
    const uint32_t n = xsk_ring_cons__peek(&r.rx, config_.batch, &rx_idx);
    if (n == 0) {
      // Nothing received: wait for frames, for at most 100 ms (to notice
      // Stop()), or 1 ms while sends await their completions (in copy mode
      // they come back within the kick; a peer that is not taking frames
      // must not make this loop spin).
      int wait_ms = 100;
      if (r.tx_outstanding > 0) {
        if (!r.Kick()) {
          return absl::InternalError(absl::StrCat("AF_XDP send: ", std::strerror(errno)));
        }
        wait_ms = 1;
      }
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, wait_ms) < 0 && errno != EINTR) {
        return absl::InternalError(absl::StrCat("poll: ", std::strerror(errno)));
      }
    } else {
      uint32_t tx_idx = 0;
      while (xsk_ring_prod__reserve(&r.tx, n, &tx_idx) != n) {  // the ring drains as we kick
        if (stop_.load()) return absl::OkStatus();
        if (!r.Kick())
          return absl::InternalError(absl::StrCat("AF_XDP send: ", std::strerror(errno)));
        r.Refill();
      }
      uint32_t sent = 0;
      for (uint32_t k = 0; k < n; ++k) {
        const xdp_desc* d = xsk_ring_cons__rx_desc(&r.rx, rx_idx + k);
        auto* data = static_cast<uint8_t*>(xsk_umem__get_data(r.area, d->addr));
        ++live_.datagrams_rx;
        ++live_.messages_rx;
        if (ReflectUdp4Frame({data, d->len}, config_.port)) {
          *xsk_ring_prod__tx_desc(&r.tx, tx_idx + sent++) = {d->addr, d->len, 0};
        } else {
          ++live_.dropped;
          r.spare.push_back(xsk_umem__extract_addr(d->addr));
        }
      }
      xsk_ring_cons__release(&r.rx, n);
      // Reserved n, used `sent`: give the rest back by submitting only
      // those (the producer's cached index is rolled back).
      r.tx.cached_prod -= n - sent;
      if (sent > 0) {
        xsk_ring_prod__submit(&r.tx, sent);
        r.tx_outstanding += sent;
        live_.datagrams_tx += sent;
        live_.messages_tx += sent;
        if (!r.Kick()) {
          ++live_.send_errors;
          return absl::InternalError(absl::StrCat("AF_XDP send: ", std::strerror(errno)));
        }
      }
    }
    absl::MutexLock lock(&mu_);
    snapshot_ = live_;
  }
  absl::MutexLock lock(&mu_);
  snapshot_ = live_;
  return absl::OkStatus();
}

#else  // !INCA_HAVE_LIBXDP

struct XskReflector::Rings {};

bool XskAvailable() {
  return false;
}

absl::StatusOr<std::unique_ptr<XskReflector>> XskReflector::Create(const XskConfig& config) {
  if (absl::Status bad = Check(config); !bad.ok()) return bad;
  return absl::UnimplementedError("this build has no AF_XDP (install libxdp-dev, rebuild)");
}

absl::Status XskReflector::Run() {
  return absl::UnimplementedError("no AF_XDP");
}

#endif  // INCA_HAVE_LIBXDP

XskReflector::XskReflector(const XskConfig& config, std::unique_ptr<Rings> rings,
                           std::string attach_mode)
    : config_(config), rings_(std::move(rings)), attach_mode_(std::move(attach_mode)) {}

XskReflector::~XskReflector() = default;

UdpForwarderCounters XskReflector::counters() const {
  absl::MutexLock lock(&mu_);
  return snapshot_;
}

}  // namespace inca::reflect
