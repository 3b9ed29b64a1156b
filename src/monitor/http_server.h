// MonitorServer: inca-switchd's monitoring endpoints over HTTP/1.1.
//
//   GET /            the dashboard (one self-contained HTML page)
//   GET /metrics     Prometheus text format 0.0.4 (RenderPrometheus)
//   GET /stats.json  the same snapshot as JSON (RenderStatsJson)
//   GET /healthz     "ok" while the server runs
// Anything else: 404. Read-only: no endpoint changes the switch.
//
// Every request to /metrics or /stats.json calls the source once, on one of
// the server's worker threads; two requests may call it concurrently, so
// the source must be thread-safe (e.g. SwitchServer::Execute() +
// CollectReducer()). Bounded: `threads` workers, request bodies over
// max_body_bytes refused, one request per connection, read/write timeouts,
// a deadline for each request and a cap on each client's connections.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "absl/status/statusor.h"
#include "monitor/metrics.h"

namespace httplib {
class Server;
}

namespace inca::monitor {

// Loopback: the endpoints have no authentication.
inline constexpr std::string_view kDefaultMonitorListen = "127.0.0.1:9411";

struct MonitorOptions {
  size_t threads = 2;  // worker threads answering requests
  std::chrono::seconds read_timeout{2};
  std::chrono::seconds write_timeout{2};
  // How long a connection may stay idle before its request arrives. Stop()
  // can take this long when a client holds an idle connection.
  std::chrono::seconds idle_timeout{2};
  size_t max_body_bytes = 1024;  // GET requests carry none
  // Accepted connections waiting for a worker. When that many wait, the
  // listener stops accepting until a worker frees one; further clients wait
  // in the kernel's listen backlog and are then refused (issue 18: httplib's
  // own queue is unbounded).
  size_t max_queued_connections = 32;
  // A connection's request (line, headers and body) must have arrived this
  // long after a worker began reading it, else the connection is closed
  // (time queued for a worker does not count: such a request has been sent,
  // it is not slow). read_timeout
  // bounds only the gap between two reads: clients sending their headers a
  // byte a second held every worker, and /healthz timed out (issue 46).
  std::chrono::milliseconds request_timeout{5000};
  // Connections one client address may hold open at once (queued or being
  // served); another from it is closed as soon as it is accepted. A browser
  // on the dashboard opens up to 6.
  size_t max_connections_per_client = 8;
};

// What a switch serves: each called once per request, possibly from two
// threads at once.
struct Renderers {
  std::function<std::string()> metrics;     // GET /metrics
  std::function<std::string()> stats_json;  // GET /stats.json
};

class MonitorServer {
 public:
  using Source = std::function<MetricsSnapshot()>;

  // Binds `listen` ("HOST:PORT" or "[IPV6]:PORT"; port 0 picks a free port,
  // see port()) and starts serving on a background thread. InvalidArgument
  // for a malformed address or options, Unavailable when it cannot be bound.
  static absl::StatusOr<std::unique_ptr<MonitorServer>> Start(std::string_view listen,
                                                              Source source,
                                                              const MonitorOptions& options = {});
  // The same with the renderings supplied directly (the OLAF program's
  // switch). The dashboard page (/) shows CAIS figures only.
  static absl::StatusOr<std::unique_ptr<MonitorServer>> Start(std::string_view listen,
                                                              Renderers renderers,
                                                              const MonitorOptions& options = {});
  // Stops serving and joins the threads (Stop()).
  ~MonitorServer();
  MonitorServer(const MonitorServer&) = delete;
  MonitorServer& operator=(const MonitorServer&) = delete;

  // Closes the listening socket and waits for requests in progress.
  // Idempotent; not from a request handler or a signal handler.
  void Stop();

  const std::string& host() const { return host_; }
  uint16_t port() const { return port_; }
  // "http://HOST:PORT/" (IPv6 hosts in brackets).
  std::string url() const;
  // The most accepted connections that waited for a worker at once (at most
  // MonitorOptions::max_queued_connections).
  size_t queued_high_water() const { return high_water_->load(); }
  // Connections closed at once for MonitorOptions::max_connections_per_client,
  // and closed because their request was not in by request_timeout.
  size_t refused_over_client_limit() const;
  size_t closed_for_request_timeout() const;

  struct Accepting;  // the accept loop's state; opaque (http_server.cc)

 private:
  MonitorServer(std::string host, uint16_t port, std::unique_ptr<httplib::Server> server);
  void AcceptLoop();

  std::string host_;
  uint16_t port_ = 0;
  std::shared_ptr<std::atomic<size_t>> high_water_ = std::make_shared<std::atomic<size_t>>(0);
  std::unique_ptr<httplib::Server> server_;
  std::shared_ptr<Accepting> accepting_;
  bool stopped_ = false;
  std::thread thread_;  // the accept loop
};

}  // namespace inca::monitor
