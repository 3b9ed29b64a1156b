// A small TCP key-value rendezvous store implementing Gloo's
// gloo::rendezvous::Store (the role torch's TCPStore plays): one rank (or
// any process) runs a TcpStoreServer; every rank connects a TcpStore client.
// Keys are write-once-or-overwrite strings, values byte strings; get/wait
// block until the keys exist or the timeout passes.
//
// Bounded: the server refuses keys over 4 KiB, values over 64 MiB, more than
// 100,000 keys, and more than 1,024 connections; a malformed request closes
// that connection only. The server runs one background thread (poll loop);
// the wire protocol is described in tcp_store_wire.h.
//
// Why not reuse one: Debian's Gloo ships FileStore, HashStore (in-process),
// PrefixStore and RedisStore, but no TCP server; torch's c10d TCPStore
// (libtorch-dev) is one, but linking libtorch into libinca for a rendezvous
// would make every C++ tool (inca-switchd's tests, cais-perf, the examples)
// depend on torch, and a Redis server is one more service for users to run.
// So inca keeps this store (about 800 lines with its protocol) and speaks
// Gloo's Store interface, so Gloo's own algorithms rendezvous through it.
//
// Client timeouts: Get and Connect take one; Set, Add and Gloo's set/get/
// wait(keys) use Store::kDefaultTimeout (30 s). Calls on one TcpStore are
// serialised (a blocked get holds the others). A call that times out or
// fails on I/O drops the connection; the next call reconnects.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gloo/rendezvous/store.h"

namespace inca::hostpath {

class TcpStoreServer {
 public:
  // Listens on host:port ("127.0.0.1:29500"; port 0 = ephemeral).
  static absl::StatusOr<std::unique_ptr<TcpStoreServer>> Start(const std::string& address);
  ~TcpStoreServer();  // stops the thread, closes every connection
  uint16_t port() const;
  // GET/WAIT requests on a missing key the server is holding open now, as of
  // its last pass over its connections (tests wait on it; thread-safe).
  size_t waiting() const;

 private:
  struct Impl;
  explicit TcpStoreServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class TcpStore final : public gloo::rendezvous::Store {
 public:
  // Connects to a server, retrying until `timeout` (the server may start
  // later than the client).
  static absl::StatusOr<std::shared_ptr<TcpStore>> Connect(const std::string& address,
                                                           std::chrono::milliseconds timeout);
  ~TcpStore() override;

  // gloo::rendezvous::Store. As Gloo expects, failures throw
  // gloo::IoException (Gloo's own stores do the same); HostGroup catches.
  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

  // Status-returning forms for our own code.
  absl::Status Set(const std::string& key, const std::string& value);
  absl::StatusOr<std::string> Get(const std::string& key, std::chrono::milliseconds timeout);
  // Atomically adds `delta` to the integer stored at key (0 if absent) and
  // returns the new value (barrier/counter helper).
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta);

 private:
  struct Impl;
  explicit TcpStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// True when a connected TCP socket's two ends are the same address and port:
// Linux's simultaneous open lets a client that keeps connecting to a local
// port nobody listens on yet, from an ephemeral port that happens to be
// that one, connect to itself, and then hold the port the server needs.
bool IsSelfConnected(int fd);

}  // namespace inca::hostpath
