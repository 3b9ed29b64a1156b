#include "monitor/http_server.h"

#include <sys/socket.h>

#include <atomic>
#include <charconv>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "monitor/dashboard.h"
#include "monitor/httplib_include.h"
#include "monitor/str_cat.h"

namespace inca::monitor {
namespace {

constexpr char kPrometheusContentType[] = "text/plain; version=0.0.4; charset=utf-8";
constexpr char kJsonContentType[] = "application/json";
constexpr char kHtmlContentType[] = "text/html; charset=utf-8";
constexpr char kTextContentType[] = "text/plain; charset=utf-8";
// The dashboard may load nothing but itself and /stats.json.
constexpr char kDashboardCsp[] =
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'";

struct HostPort {
  std::string host;
  uint16_t port = 0;
};

absl::StatusOr<HostPort> ParseListen(std::string_view listen) {
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(
        internal::StrCat("HTTP listen address '", listen, "': ", why,
                         " (expected HOST:PORT or [IPV6]:PORT, port 0-65535)"));
  };
  HostPort hp;
  std::string_view port;
  if (listen.starts_with('[')) {
    const size_t close = listen.find("]:");
    if (close == std::string_view::npos) return bad("no ']:' after the IPv6 address");
    hp.host = std::string(listen.substr(1, close - 1));
    port = listen.substr(close + 2);
  } else {
    const size_t colon = listen.rfind(':');
    if (colon == std::string_view::npos) return bad("no port");
    hp.host = std::string(listen.substr(0, colon));
    if (hp.host.find(':') != std::string::npos) return bad("IPv6 addresses go in brackets");
    port = listen.substr(colon + 1);
  }
  if (hp.host.empty()) return bad("empty host");
  unsigned value = 0;
  const auto r = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || r.ec != std::errc() || r.ptr != port.data() + port.size() || value > 65535) {
    return bad("bad port");
  }
  hp.port = static_cast<uint16_t>(value);
  return hp;
}

std::string_view StatusText(int status) {
  switch (status) {
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 413: return "Payload Too Large";
    case 414: return "URI Too Long";
    case 500: return "Internal Server Error";
    default: return "Error";
  }
}

void NoStore(httplib::Response& res) {
  res.set_header("Cache-Control", "no-store");
  res.set_header("X-Content-Type-Options", "nosniff");
}

}  // namespace

absl::StatusOr<std::unique_ptr<MonitorServer>> MonitorServer::Start(std::string_view listen,
                                                                    Source source,
                                                                    const MonitorOptions& options) {
  if (!source) return absl::InvalidArgumentError("MonitorServer needs a snapshot source");
  Renderers r;
  r.metrics = [source] { return RenderPrometheus(source()); };
  r.stats_json = [source] { return RenderStatsJson(source()); };
  return Start(listen, std::move(r), options);
}

namespace {

// httplib's ThreadPool queues every accepted connection, without bound.
// This one keeps at most `max_queued`: enqueue() runs on the accept thread
// and waits while the queue is full, so the listener stops accepting and
// later clients wait in the kernel's backlog. Workers drain the queue
// before they stop, as httplib's do.
class BoundedThreadPool final : public httplib::TaskQueue {
 public:
  BoundedThreadPool(size_t threads, size_t max_queued,
                    std::shared_ptr<std::atomic<size_t>> high_water)
      : max_queued_(max_queued), high_water_(std::move(high_water)) {
    for (size_t i = 0; i < threads; ++i) workers_.emplace_back([this] { Work(); });
  }
  void enqueue(std::function<void()> fn) override {
    std::unique_lock lock(mu_);
    space_.wait(lock, [&] { return stopping_ || jobs_.size() < max_queued_; });
    if (stopping_) {  // no worker will take it: serve (and close) it here
      lock.unlock();
      fn();
      return;
    }
    jobs_.push_back(std::move(fn));
    if (jobs_.size() > high_water_->load()) high_water_->store(jobs_.size());
    work_.notify_one();
  }
  void shutdown() override {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    work_.notify_all();
    space_.notify_all();
    for (auto& t : workers_) t.join();
  }

 private:
  void Work() {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock lock(mu_);
        work_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
        if (jobs_.empty()) return;  // stopping, drained
        fn = std::move(jobs_.front());
        jobs_.pop_front();
      }
      space_.notify_one();
      fn();
    }
  }

  const size_t max_queued_;
  std::shared_ptr<std::atomic<size_t>> high_water_;
  std::mutex mu_;
  std::condition_variable work_, space_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<MonitorServer>> MonitorServer::Start(std::string_view listen,
                                                                    Renderers renderers,
                                                                    const MonitorOptions& options) {
  absl::StatusOr<HostPort> where = ParseListen(listen);
  if (!where.ok()) return where.status();
  if (!renderers.metrics || !renderers.stats_json) {
    return absl::InvalidArgumentError("MonitorServer needs both renderers");
  }
  if (options.threads == 0 || options.threads > 64) {
    return absl::InvalidArgumentError("MonitorOptions::threads must be in 1..64");
  }

  if (options.max_queued_connections == 0) {
    return absl::InvalidArgumentError("MonitorOptions::max_queued_connections must be at least 1");
  }

  auto server = std::make_unique<httplib::Server>();
  const size_t threads = options.threads, queued = options.max_queued_connections;
  auto high_water = std::make_shared<std::atomic<size_t>>(0);
  server->new_task_queue = [threads, queued, high_water] {
    return new BoundedThreadPool(threads, queued, high_water);
  };
  server->set_read_timeout(options.read_timeout.count(), 0);
  server->set_write_timeout(options.write_timeout.count(), 0);
  server->set_keep_alive_timeout(options.idle_timeout.count());
  server->set_keep_alive_max_count(1);  // one request per connection: workers stay free
  server->set_payload_max_length(options.max_body_bytes);
  // SO_REUSEADDR only: httplib's default also sets SO_REUSEPORT, which would
  // let a second switch share (and steal requests from) a port in use.
  server->set_socket_options([](int sock) {
    const int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });

  // The renderers are shared by the handlers; std::function copies are cheap.
  server->Get("/metrics", [m = renderers.metrics](const httplib::Request&, httplib::Response& res) {
    NoStore(res);
    res.set_content(m(), kPrometheusContentType);
  });
  server->Get(R"(/stats\.json)",
              [j = renderers.stats_json](const httplib::Request&, httplib::Response& res) {
                NoStore(res);
                res.set_content(j(), kJsonContentType);
              });
  server->Get("/", [](const httplib::Request&, httplib::Response& res) {
    NoStore(res);
    res.set_header("Content-Security-Policy", kDashboardCsp);
    const std::string_view html = DashboardHtml();
    res.set_content(html.data(), html.size(), kHtmlContentType);
  });
  server->Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    NoStore(res);
    res.set_content("ok\n", kTextContentType);
  });
  server->set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    NoStore(res);
    res.set_content(internal::StrCat(res.status, " ", StatusText(res.status), "\n"),
                    kTextContentType);
  });
  server->set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
        res.status = 500;
        NoStore(res);
        res.set_content("500 Internal Server Error\n", kTextContentType);
      });

  uint16_t port = where->port;
  if (port == 0) {
    const int got = server->bind_to_any_port(where->host);
    if (got <= 0) {
      return absl::UnavailableError(internal::StrCat("cannot bind HTTP listener on ", listen));
    }
    port = static_cast<uint16_t>(got);
  } else if (!server->bind_to_port(where->host, port)) {
    return absl::UnavailableError(internal::StrCat("cannot bind HTTP listener on ", listen,
                                                   " (address in use or not local?)"));
  }

  std::unique_ptr<MonitorServer> monitor(
      new MonitorServer(std::move(where->host), port, std::move(server)));
  monitor->high_water_ = high_water;
  // listen_after_bind() marks the server running before it accepts; Stop()
  // is only effective from then on, so wait for it here.
  auto done = std::make_shared<std::atomic<bool>>(false);
  httplib::Server* s = monitor->server_.get();
  monitor->thread_ = std::thread([s, done] {
    s->listen_after_bind();
    done->store(true);
  });
  while (!s->is_running() && !done->load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!s->is_running()) {
    monitor->Stop();
    return absl::InternalError(internal::StrCat("HTTP listener on ", listen, " did not start"));
  }
  return monitor;
}

MonitorServer::MonitorServer(std::string host, uint16_t port,
                             std::unique_ptr<httplib::Server> server)
    : host_(std::move(host)), port_(port), server_(std::move(server)) {}

MonitorServer::~MonitorServer() {
  Stop();
}

void MonitorServer::Stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

std::string MonitorServer::url() const {
  const bool v6 = host_.find(':') != std::string::npos;
  return internal::StrCat("http://", v6 ? "[" : "", host_, v6 ? "]" : "", ":", port_, "/");
}

}  // namespace inca::monitor
