// The TCP store's wire protocol and what its server and client share
// (internal to src/hostpath; users include tcp_store.h).
//
// Wire protocol (version 1). Every message in either direction is a frame:
//
//   frame := u32 body_len | body[body_len]          (integers little-endian)
//
// Request bodies (client -> server):
//
//   request := u8 op | u32 key_len | key[key_len] | payload
//     op 1 SET   payload = the value (the rest of the body, may be empty)
//     op 2 GET   payload empty; the reply is sent once the key exists
//     op 3 ADD   payload = i64 delta; the key's value is a decimal int64
//                string ("" / absent counts as 0), replaced by the sum
//     op 4 WAIT  payload empty; an empty reply is sent once the key exists
//
// Reply bodies (server -> client), one per request, in request order:
//
//   reply := u8 code | payload
//     code 0 (OK): GET -> the value; ADD -> i64 new value; SET/WAIT -> empty
//     code != 0:   an absl::StatusCode (ResourceExhausted: too many keys;
//                  InvalidArgument: ADD on a non-integer value; OutOfRange:
//                  ADD overflow); payload = a message
//
// A request that does not parse (body_len < 5 or over the largest legal
// request, key_len over 4 KiB or past the body, unknown op, ADD payload not
// 8 bytes, GET/WAIT with a payload) is malformed: the server closes that
// connection and nothing else. Requests may be pipelined; they are served in
// order, so a GET/WAIT on a missing key holds the ones behind it. Waiting is
// done server-side: the pending GET/WAIT of a connection is re-checked
// whenever a SET or ADD changes the store. The server never times a request
// out; the client bounds each call with poll() and, when it gives up, drops
// the connection (its pending reply would otherwise answer the next request)
// and reconnects on the next call.
//
// Bounds: keys <= 4 KiB, values <= 64 MiB, <= 100,000 keys, <= 1,024
// connections (more are accepted and closed at once). Per connection the
// server buffers at most one largest request of input and one reply of
// output; it stops reading from a connection that is waiting or has an
// unsent reply once that much input is buffered.
#pragma once

#include <netdb.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace inca::hostpath::store_wire {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxKeyBytes = 4 * 1024;
constexpr size_t kMaxValueBytes = 64 * 1024 * 1024;
constexpr size_t kMaxKeys = 100'000;
constexpr size_t kMaxConnections = 1'024;

enum Op : uint8_t { kSet = 1, kGet = 2, kAdd = 3, kWait = 4 };

constexpr size_t kFrameHeaderBytes = 4;
constexpr size_t kRequestHeaderBytes = 1 + 4;  // op, key_len
constexpr size_t kMaxRequestBody = kRequestHeaderBytes + kMaxKeyBytes + kMaxValueBytes;
// The longest reply: a GET of a largest value (error messages are short).
constexpr size_t kMaxReplyBody = 1 + kMaxValueBytes;
constexpr size_t kReadChunk = 256 * 1024;

void PutU32(std::string& s, uint32_t v);
void PutI64(std::string& s, int64_t v);
uint32_t GetU32(const char* p);
int64_t GetI64(const char* p);
std::string ErrnoText(int err);

// Splits "host:port" / "[v6]:port". An empty host means "any" (server) or
// loopback (client, via getaddrinfo's default).
absl::Status SplitAddress(const std::string& address, std::string* host, std::string* port);

struct AddrInfoDeleter {
  void operator()(addrinfo* ai) const { freeaddrinfo(ai); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;
absl::StatusOr<AddrInfoPtr> Resolve(const std::string& host, const std::string& port, bool passive);
void SetNoDelay(int fd);

// Milliseconds until `deadline` for poll(), rounded up, clamped to [0, INT_MAX].
int PollMillis(Clock::time_point deadline);
Clock::time_point DeadlineAfter(std::chrono::milliseconds timeout);

}  // namespace inca::hostpath::store_wire
