#include "client/transport_options.h"

#include <algorithm>

namespace inca::client {

TransportConfig TransportConfigFrom(const CommunicatorOptions& o) {
  TransportConfig c;
  c.group_id = o.group_id;
  c.world_size = o.world_size;
  c.chunk_size = o.chunk_size;
  c.max_window = o.max_pending_chunks;
  c.min_window = std::min<uint32_t>(2, o.max_pending_chunks);
  c.initial_window = std::min<uint32_t>(16, o.max_pending_chunks);
  c.rto_min_ns = int64_t{o.retransmit_timeout_ms} * 1'000'000;
  c.rto_max_ns = int64_t{o.max_retransmit_timeout_ms} * 1'000'000;
  c.give_up_ns = int64_t{o.switch_timeout_ms} * 1'000'000;
  c.competitive = o.competitive;
  c.trace_capacity = o.window_trace_samples;
  c.pacing_gain = o.pacing_gain;
  c.pacing_burst = o.pacing_burst;
  return c;
}

SwitchTransportOptions SwitchTransportOptionsFrom(const CommunicatorOptions& o) {
  SwitchTransportOptions t;
  t.switch_address = o.switch_address;
  t.bind_ip = o.bind_ip;
  t.io = o.io;
  t.rank = o.rank;
  t.job = o.job;
  t.switch_port = o.switch_port;
  t.core = TransportConfigFrom(o);
  return t;
}

}  // namespace inca::client
