#include "inca/olaf/worker_id.h"

#include "inca/wire/olaf.h"

namespace inca::olaf {

FlowKey FlowKey::V4(uint32_t src_ip, uint32_t dst_ip, uint16_t src_port, uint16_t dst_port,
                    uint8_t proto) {
  FlowKey k;
  auto put = [](std::array<uint8_t, 16>& a, uint32_t v) {
    a[10] = a[11] = 0xFF;
    for (int i = 0; i < 4; ++i)
      a[static_cast<size_t>(12 + i)] = static_cast<uint8_t>(v >> (24 - 8 * i));
  };
  put(k.src_ip, src_ip);
  put(k.dst_ip, dst_ip);
  k.src_port = src_port;
  k.dst_port = dst_port;
  k.proto = proto;
  return k;
}

uint32_t WorkerIdOf(const FlowKey& f) {
  uint32_t h = 2166136261u;  // FNV-1a offset basis
  auto mix = [&h](uint8_t b) {
    h ^= b;
    h *= 16777619u;  // FNV prime
  };
  for (uint8_t b : f.src_ip) mix(b);
  for (uint8_t b : f.dst_ip) mix(b);
  mix(static_cast<uint8_t>(f.src_port >> 8));
  mix(static_cast<uint8_t>(f.src_port));
  mix(static_cast<uint8_t>(f.dst_port >> 8));
  mix(static_cast<uint8_t>(f.dst_port));
  mix(f.proto);
  return h == kUnstampedWorker ? 1 : h;
}

}  // namespace inca::olaf
