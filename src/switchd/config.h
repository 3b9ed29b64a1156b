// inca-switchd configuration: defaults, YAML loading, validation.
// Each scalar setting is declared once, in switchd/settings.cc (its key,
// flag, range, unit, default and doc); docs/settings.md is generated from it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "inca/cais/reducer.h"
#include "inca/cais/rule_table.h"
#include "inca/dataplane/program.h"

namespace inca::switchd {

// A switch port wired to a fixed endpoint (never released).
struct StaticPort {
  dp::PortId port = 0;
  std::string endpoint;  // "HOST:PORT" or "[IPV6]:PORT", numeric
};

// The OLAF program's settings (inca-switchd --program olaf|fifo).
struct OlafSettings {
  std::string ps;  // the parameter server, "HOST:PORT"
  uint32_t depth = 8;
  double delta_t_ms = 400;
  double tau_ms = 100;
  double egress_mbps = 40000;  // the PS-facing link; 0 = unpaced
  // Cluster table: UDP source port -> cluster.
  std::vector<std::pair<uint16_t, uint16_t>> clusters;
};

struct SwitchdConfig {
  // Which data-plane program runs: "cais" (in-switch reduction), "olaf"
  // (AoM-aware queue for async DRL) or "fifo" (OLAF's baseline).
  std::string program = "cais";
  OlafSettings olaf;
  // Where the switch listens: "HOST:PORT" or "[IPV6]:PORT" (port 0 picks an
  // ephemeral port; see SwitchServer::local_port()).
  std::string listen = "127.0.0.1:9410";
  // Reduction core: sram_bytes, sram_usage_limit, max_pending_chunks,
  // max_payload_bytes (a.k.a. chunk_size), timeout, result hold, deterministic.
  cais::CaisConfig cais;
  std::vector<StaticPort> ports;
  // Static rules; a group named here cannot be formed by JOIN.
  std::vector<cais::Rule> rules;
  // SO_RCVBUF / SO_SNDBUF requested (best effort; 0 = kernel default). The
  // sizes granted are reported by the server.
  size_t socket_buffer_bytes = size_t{8} << 20;
  // Datagrams per recvmmsg/sendmmsg call.
  uint32_t batch_size = 64;
  // Data-plane shards (CAIS only): each a reducer on its own thread, socket
  // (listen port + i) and 1/threads of sram_bytes (switchd/shards.h).
  uint32_t threads = 1;
  // Socket I/O path: "gso" (UDP_SEGMENT sends and UDP_GRO receives where
  // the kernel has them, else as mmsg) or "mmsg" (one datagram per message).
  // See src/net/udp.h.
  std::string io = "gso";
  // Loss injection on CAIS data (not management): probability in [0, 1]
  // that a datagram is dropped on ingress (before the reducer) or on egress
  // (after). 1.0 drops everything. Deterministic for a given loss_seed.
  double ingress_loss = 0.0;
  double egress_loss = 0.0;
  uint64_t loss_seed = 1;
  // trace, debug, info, warn, error, critical, off.
  std::string log_level = "info";
  // Group leases (docs/switchd.md, "Leases"): a member silent this long (no
  // JOIN, PING, REPORT or data) loses its group; hosts PING every lease/4.
  // [kMinLeaseMs, kMaxLeaseMs] of group_manager.h; changeable at run time.
  uint32_t lease_ms = 10'000;
  // Seconds between stats log lines; 0 = none.
  double stats_interval_s = 0.0;
  // The gRPC control API and the HTTP monitor: "HOST:PORT" (port 0 = any
  // free) or "off". Loopback by default (docs/control.md, docs/monitoring.md).
  std::string control_listen = "127.0.0.1:50051";
  std::string http_listen = "127.0.0.1:9411";
  // Offload decisions: "embedded" (this process, every 100 ms), "external"
  // (an inca-controller pushes them) or "off" (every operation offloaded),
  // and the cost model's assumptions (docs/control.md).
  std::string offload_controller = "embedded";
  double offload_host_gbps = 100;
  double offload_host_latency_us = 100;
  double offload_switch_gbps = 400;
  // Judge from the times hosts report (true) or from the model alone.
  bool offload_measured = true;
  // The unused path of a measured size class is measured again this often.
  double offload_explore_ms = 10000;

  // Checks everything but name resolution: CaisConfig::Validate(), ranges,
  // static ports (0..1023, unique ports and endpoints, parseable), static rules
  // (RuleTable::Validate, ports 0..1023, unique keys). InvalidArgument naming
  // the key.
  absl::Status Validate() const;
};

// Reads, parses and validates a YAML file. Unknown keys, wrong types and
// out-of-range values are InvalidArgument naming the key (and line); an
// unreadable file is NotFound / InvalidArgument with the path.
absl::StatusOr<SwitchdConfig> LoadSwitchdConfigYaml(const std::string& path);

// The same from YAML text; `source` names it in error messages. Keys absent
// from the text keep the values already in `*config`, so defaults (or an
// earlier layer) show through. On error `*config` may be partly updated.
absl::Status ApplySwitchdConfigYaml(std::string_view yaml, std::string_view source,
                                    SwitchdConfig* config);

// "allreduce", "allgather", "broadcast", "reducescatter" -> the op; "any" ->
// nullopt. InvalidArgument otherwise.
absl::StatusOr<std::optional<wire::CaisOp>> ParseOpType(std::string_view name);

}  // namespace inca::switchd
