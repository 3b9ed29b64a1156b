#include "monitor/http_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
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

// httplib (0.11) accepts in listen_after_bind() and hands each connection
// straight to a worker: nothing can look at a connection before a worker is
// blocked reading it. MonitorServer accepts itself instead (to count each
// client's connections and to give every request a deadline) and hands the
// socket to the member that serves one, Server::process_and_close_socket.
// It is private; the one access the language leaves to a private member is
// an explicit instantiation's template argument, which is not access-checked
// ([temp.spec.general]/6). A cpp-httplib that renames it fails to compile.
using ServeSocket = bool (httplib::Server::*)(socket_t);
struct ServeSocketTag {
  friend ServeSocket ServeSocketMember(ServeSocketTag);
};
template <ServeSocket kMember>
struct ExposeServeSocket {
  friend ServeSocket ServeSocketMember(ServeSocketTag) { return kMember; }
};
template struct ExposeServeSocket<&httplib::Server::process_and_close_socket>;

// The bound listening socket (svr_sock_ is protected): served connections
// check it, and end once it is taken.
class ListeningServer final : public httplib::Server {
 public:
  socket_t listen_socket() const { return svr_sock_; }
  socket_t TakeListenSocket() { return svr_sock_.exchange(INVALID_SOCKET); }
};

// The numeric address of a connection's client ("" if unknown).
std::string ClientAddress(const sockaddr_storage& ss) {
  char text[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr, text, sizeof(text));
  } else if (ss.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr, text, sizeof(text));
  }
  return text;
}

}  // namespace

// The accept loop's state, shared with the jobs that serve connections and
// with the watchdog thread that ends requests past their deadline.
struct MonitorServer::Accepting {
  using Clock = std::chrono::steady_clock;
  struct Open {
    int watch = -1;  // a dup of the connection: shutdown() on it ends its read or write
    Clock::time_point deadline;
    bool serving = false;     // a worker reads it: the deadline runs
    bool request_in = false;  // a handler runs: the deadline no longer applies
    std::string client;
  };
  MonitorOptions options;
  std::unique_ptr<BoundedThreadPool> pool;
  int wake[2] = {-1, -1};  // written by Stop(): the accept loop's poll returns
  std::atomic<size_t> refused{0}, timed_out{0};
  std::thread watchdog;
  std::mutex mu;
  std::condition_variable changed;
  bool stopping = false;  // guarded by mu
  std::map<uint64_t, Open> open;
  std::map<std::string, size_t> per_client;
  uint64_t next_id = 0;

  ~Accepting() {
    for (int fd : wake) {
      if (fd >= 0) ::close(fd);
    }
  }
  // Registers an accepted connection; false (to be closed at once) when its
  // client is at max_connections_per_client, or when stopping.
  bool Admit(int sock, const std::string& client, uint64_t* id) {
    std::lock_guard lock(mu);
    if (stopping) return false;
    auto [it, added] = per_client.try_emplace(client, 0);
    if (it->second >= options.max_connections_per_client) return false;
    ++it->second;
    *id = next_id++;
    open[*id] = {::dup(sock), Clock::time_point::max(), false, false, client};
    return true;
  }
  // A worker starts reading the connection: its request has request_timeout
  // from now. (Not from the accept: a request waiting in the queue behind
  // slow ones has been sent; it is not slow.)
  void Serving(uint64_t id) {
    std::lock_guard lock(mu);
    auto it = open.find(id);
    if (it == open.end()) return;
    it->second.serving = true;
    it->second.deadline = Clock::now() + options.request_timeout;
    changed.notify_all();
  }
  void RequestIn(uint64_t id) {
    std::lock_guard lock(mu);
    if (auto it = open.find(id); it != open.end()) it->second.request_in = true;
  }
  void Finish(uint64_t id) {
    std::lock_guard lock(mu);
    auto it = open.find(id);
    if (it == open.end()) return;
    if (it->second.watch >= 0) ::close(it->second.watch);
    if (--per_client[it->second.client] == 0) per_client.erase(it->second.client);
    open.erase(it);
  }
  // The watchdog: ends each request still not in at its deadline (every
  // connection once stopping), waiting on `changed` until the next one.
  void Watch() {
    std::unique_lock lock(mu);
    for (;;) {
      const auto now = Clock::now();
      std::optional<Clock::time_point> next;
      for (auto& [id, o] : open) {
        if (o.watch < 0 || ((o.request_in || !o.serving) && !stopping)) continue;
        if (!stopping && o.deadline > now) {
          next = next ? std::min(*next, o.deadline) : o.deadline;
          continue;
        }
        ::shutdown(o.watch, SHUT_RDWR);  // the worker's read ends; it closes the connection
        ::close(o.watch);
        o.watch = -1;
        if (!stopping) ++timed_out;
      }
      if (stopping) return;
      if (next) {
        changed.wait_until(lock, *next);
      } else {
        changed.wait(lock);
      }
    }
  }
  void Stop() {
    {
      std::lock_guard lock(mu);
      stopping = true;
    }
    changed.notify_all();
    const char b = 1;
    ssize_t ignored = ::write(wake[1], &b, 1);
    (void)ignored;
    if (watchdog.joinable()) watchdog.join();
  }
};

namespace {

// The connection the calling worker serves, for its handlers to report
// that its request is in.
thread_local MonitorServer::Accepting* t_accepting = nullptr;
thread_local uint64_t t_connection = 0;

void RequestIn() {
  if (t_accepting != nullptr) t_accepting->RequestIn(t_connection);
}

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
  if (options.max_connections_per_client == 0 ||
      options.request_timeout < std::chrono::milliseconds(1)) {
    return absl::InvalidArgumentError(
        "MonitorOptions::max_connections_per_client and request_timeout must be positive");
  }

  auto server = std::make_unique<ListeningServer>();
  auto high_water = std::make_shared<std::atomic<size_t>>(0);
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
  // Every handler first reports its request in (RequestIn): from there the
  // request deadline no longer applies.
  server->Get("/metrics", [m = renderers.metrics](const httplib::Request&, httplib::Response& res) {
    RequestIn();
    NoStore(res);
    res.set_content(m(), kPrometheusContentType);
  });
  server->Get(R"(/stats\.json)",
              [j = renderers.stats_json](const httplib::Request&, httplib::Response& res) {
                RequestIn();
                NoStore(res);
                res.set_content(j(), kJsonContentType);
              });
  server->Get("/", [](const httplib::Request&, httplib::Response& res) {
    RequestIn();
    NoStore(res);
    res.set_header("Content-Security-Policy", kDashboardCsp);
    const std::string_view html = DashboardHtml();
    res.set_content(html.data(), html.size(), kHtmlContentType);
  });
  server->Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    RequestIn();
    NoStore(res);
    res.set_content("ok\n", kTextContentType);
  });
  server->set_error_handler([](const httplib::Request&, httplib::Response& res) {
    RequestIn();
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

  auto accepting = std::make_shared<Accepting>();
  accepting->options = options;
  if (::pipe2(accepting->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    return absl::InternalError("MonitorServer: pipe2 failed");
  }
  accepting->pool = std::make_unique<BoundedThreadPool>(options.threads,
                                                        options.max_queued_connections, high_water);
  std::unique_ptr<MonitorServer> monitor(
      new MonitorServer(std::move(where->host), port, std::move(server)));
  monitor->high_water_ = high_water;
  monitor->accepting_ = std::move(accepting);
  monitor->accepting_->watchdog = std::thread([a = monitor->accepting_.get()] { a->Watch(); });
  monitor->thread_ = std::thread([m = monitor.get()] { m->AcceptLoop(); });
  return monitor;
}

// Accepts until Stop(): a client at its connection limit is closed at once;
// every other connection goes to a worker with a deadline for its request,
// which this loop enforces between accepts.
void MonitorServer::AcceptLoop() {
  Accepting& a = *accepting_;
  auto* server = static_cast<ListeningServer*>(server_.get());
  const ServeSocket serve = ServeSocketMember(ServeSocketTag{});
  const socket_t listener = server->listen_socket();
  for (;;) {
    pollfd fds[2] = {{listener, POLLIN, 0}, {a.wake[0], POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0 && errno != EINTR) return;
    if (fds[1].revents != 0) return;  // Stop()
    if ((fds[0].revents & POLLIN) == 0) continue;
    sockaddr_storage peer{};
    socklen_t len = sizeof(peer);
    const int sock = ::accept4(listener, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_CLOEXEC);
    if (sock < 0) {
      // Out of descriptors: the pending connection stays readable, so back
      // off rather than spin until workers close some.
      if (errno == EMFILE || errno == ENFILE) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      continue;
    }
    uint64_t id = 0;
    if (!a.Admit(sock, ClientAddress(peer), &id)) {
      ++a.refused;
      ::close(sock);
      continue;
    }
    // As httplib's own accept loop sets them.
    timeval rt{static_cast<time_t>(a.options.read_timeout.count()), 0};
    timeval wt{static_cast<time_t>(a.options.write_timeout.count()), 0};
    ::setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &rt, sizeof(rt));
    ::setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &wt, sizeof(wt));
    // Waits while max_queued_connections wait (the backlog holds the rest);
    // the watchdog ends late requests meanwhile, which frees the workers.
    a.pool->enqueue([server, serve, acc = accepting_, id, sock] {
      t_accepting = acc.get();
      t_connection = id;
      acc->Serving(id);
      (server->*serve)(sock);  // serves one request, then closes the socket
      t_accepting = nullptr;
      acc->Finish(id);
    });
  }
}

size_t MonitorServer::refused_over_client_limit() const {
  return accepting_->refused.load();
}

size_t MonitorServer::closed_for_request_timeout() const {
  return accepting_->timed_out.load();
}

MonitorServer::MonitorServer(std::string host, uint16_t port,
                             std::unique_ptr<httplib::Server> server)
    : host_(std::move(host)), port_(port), server_(std::move(server)) {}

MonitorServer::~MonitorServer() {
  Stop();
}

// Stops accepting, closes the listener (a connection still queued is then
// closed unserved) and ends every connection in progress, then waits for the
// workers.
void MonitorServer::Stop() {
  if (!accepting_ || stopped_) return;
  stopped_ = true;
  accepting_->Stop();  // no more admissions; every connection's read or write ends
  if (thread_.joinable()) thread_.join();
  const socket_t listener = static_cast<ListeningServer*>(server_.get())->TakeListenSocket();
  if (listener != INVALID_SOCKET) {
    ::shutdown(listener, SHUT_RDWR);
    ::close(listener);
  }
  accepting_->pool->shutdown();
}

std::string MonitorServer::url() const {
  const bool v6 = host_.find(':') != std::string::npos;
  return internal::StrCat("http://", v6 ? "[" : "", host_, v6 ? "]" : "", ":", port_, "/");
}

}  // namespace inca::monitor
