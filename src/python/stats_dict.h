// CommunicatorStats as the Python dict both bindings return (`cais.stats()`
// and the torch backend's `stats()`), spelled once.
#pragma once

#include <pybind11/pybind11.h>

#include "inca/client/communicator.h"

namespace inca::python {

inline pybind11::dict StatsDict(const CommunicatorStats& s) {
  pybind11::dict d;
  d["ops"] = s.ops;
  d["ops_switch"] = s.ops_switch;
  d["ops_host"] = s.ops_host;
  d["ops_declined"] = s.ops_declined;
  d["chunks_sent"] = s.chunks_sent;
  d["chunks_retransmitted"] = s.chunks_retransmitted;
  d["tail_probes"] = s.tail_probes;
  d["result_requests"] = s.result_requests;
  d["fallback_notices"] = s.fallback_notices;
  d["chunks_recovered_on_host"] = s.chunks_recovered_on_host;
  d["served_peers"] = s.served_peers;
  d["rejoins"] = s.rejoins;
  d["offload_active"] = s.offload_active;
  d["window_chunks"] = s.window_chunks;
  d["srtt_us"] = s.srtt_us;
  d["base_rtt_us"] = s.base_rtt_us;
  d["competitive"] = s.competitive;
  d["competitive_entries"] = s.competitive_entries;
  d["drain_probes"] = s.drain_probes;
  return d;
}

}  // namespace inca::python
