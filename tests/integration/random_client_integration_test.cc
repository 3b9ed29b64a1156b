// A bounded random client against a real inca-switchd (issue 18): every
// control API request message, with fields filled at random from values
// chosen to sit on and past the edges (ids, ports, limits, endpoints,
// config keys and numbers, long and binary strings), and random HTTP
// requests to the monitor. The switch must answer each with a status or an
// HTTP response (never INTERNAL, UNKNOWN or a dropped connection), keep its
// one-line error messages, and still serve and conserve packets afterwards.
#include <arpa/inet.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/reflection.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "inca/control/v1/control.grpc.pb.h"
#include "launch/process.h"

namespace inca::integration {
namespace {

namespace pb = ::inca::control::v1;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

class RandomFields {
 public:
  explicit RandomFields(uint32_t seed) : rng_(seed) {}

  uint64_t Number() {
    static const uint64_t kEdges[] = {0,          1,          2,          3,          4,
                                      63,         64,         255,        256,        1023,
                                      1024,       65535,      65536,      1000,       10000,
                                      2147483647, 2147483648, 4294967295, 1ull << 40, UINT64_MAX};
    if (Pick(4) == 0) return rng_();
    return kEdges[Pick(std::size(kEdges))];
  }
  std::string String() {
    static const char* kWords[] = {"",
                                   "timeout_ms",
                                   "lease_ms",
                                   "group_share",
                                   "offload_threshold",
                                   "sram_usage_limit",
                                   "result_hold_ms",
                                   "chunk_size",
                                   "max_pending_chunks",
                                   "resend_limit",
                                   "deterministic",
                                   "program",
                                   "depth",
                                   "-1",
                                   "0",
                                   "0.5",
                                   "1e309",
                                   "nan",
                                   "99999999999999999999",
                                   "abc",
                                   "true",
                                   "127.0.0.1:1",
                                   "127.0.0.1:0",
                                   "[::1]:9",
                                   "198.18.0.1:65535",
                                   "127.0.0.1:abc",
                                   ":",
                                   "allreduce",
                                   "any"};
    switch (Pick(4)) {
      case 0: return std::string(Pick(5000), static_cast<char>('a' + Pick(26)));
      case 1: {
        std::string s(Pick(64), '\0');
        // Any byte a proto3 string may hold (valid UTF-8: NULs and control
        // characters included; gRPC itself refuses invalid UTF-8).
        for (char& c : s) c = static_cast<char>(Pick(128));
        return s;
      }
      default: return kWords[Pick(std::size(kWords))];
    }
  }
  void Fill(Message* m, int depth = 0) {
    const auto* d = m->GetDescriptor();
    const Reflection* r = m->GetReflection();
    for (int i = 0; i < d->field_count(); ++i) {
      const FieldDescriptor* f = d->field(i);
      if (Pick(4) == 0) continue;  // left unset
      const size_t n = f->is_repeated() ? Pick(Pick(8) == 0 ? 200 : 6) : 1;
      for (size_t k = 0; k < n; ++k) Set(m, r, f, depth);
    }
  }

 private:
  size_t Pick(size_t n) {
    return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng_);
  }
  void Set(Message* m, const Reflection* r, const FieldDescriptor* f, int depth) {
    const bool rep = f->is_repeated();
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32: {
        const auto v = static_cast<int32_t>(Number());
        rep ? r->AddInt32(m, f, v) : r->SetInt32(m, f, v);
        break;
      }
      case FieldDescriptor::CPPTYPE_UINT32: {
        const auto v = static_cast<uint32_t>(Number());
        rep ? r->AddUInt32(m, f, v) : r->SetUInt32(m, f, v);
        break;
      }
      case FieldDescriptor::CPPTYPE_INT64: {
        const auto v = static_cast<int64_t>(Number());
        rep ? r->AddInt64(m, f, v) : r->SetInt64(m, f, v);
        break;
      }
      case FieldDescriptor::CPPTYPE_UINT64: {
        const uint64_t v = Number();
        rep ? r->AddUInt64(m, f, v) : r->SetUInt64(m, f, v);
        break;
      }
      case FieldDescriptor::CPPTYPE_DOUBLE: {
        static const double kD[] = {0, -1, 0.5, 1, 1.5, 1e300, -0.0, 1e-300};
        const double v = Pick(9) == 8 ? std::numeric_limits<double>::quiet_NaN() : kD[Pick(8)];
        rep ? r->AddDouble(m, f, v) : r->SetDouble(m, f, v);
        break;
      }
      case FieldDescriptor::CPPTYPE_FLOAT: {
        const auto v = static_cast<float>(static_cast<int64_t>(Number() % 2001) - 1000) / 100.0f;
        rep ? r->AddFloat(m, f, v) : r->SetFloat(m, f, v);
        break;
      }
      case FieldDescriptor::CPPTYPE_BOOL: {
        const bool v = Pick(2) == 1;
        rep ? r->AddBool(m, f, v) : r->SetBool(m, f, v);
        break;
      }
      case FieldDescriptor::CPPTYPE_ENUM: {
        const int v = static_cast<int>(Number() % 8);  // unknown values too (open enums)
        rep ? r->AddEnumValue(m, f, v) : r->SetEnumValue(m, f, v);
        break;
      }
      case FieldDescriptor::CPPTYPE_STRING: {
        const std::string v = String();
        rep ? r->AddString(m, f, v) : r->SetString(m, f, v);
        break;
      }
      case FieldDescriptor::CPPTYPE_MESSAGE: {
        if (depth > 3) break;
        Fill(rep ? r->AddMessage(m, f) : r->MutableMessage(m, f), depth + 1);
        break;
      }
    }
  }

  std::mt19937_64 rng_;
};

// The codes a validated request may get. INTERNAL, UNKNOWN, UNAVAILABLE
// (the switch gone) and DATA_LOSS mean a bug.
bool Expected(grpc::StatusCode c) {
  switch (c) {
    case grpc::OK:
    case grpc::INVALID_ARGUMENT:
    case grpc::NOT_FOUND:
    case grpc::ALREADY_EXISTS:
    case grpc::FAILED_PRECONDITION:
    case grpc::RESOURCE_EXHAUSTED:
    case grpc::OUT_OF_RANGE:
    case grpc::DEADLINE_EXCEEDED:  // StreamStats, cut short by the client
    case grpc::CANCELLED: return true;
    default: return false;
  }
}

class RandomClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = absl::StrCat("127.0.0.1:", launch::FreeLoopbackPort(true));
    control_ = absl::StrCat("127.0.0.1:", launch::FreeLoopbackPort(false));
    http_port_ = launch::FreeLoopbackPort(false);
    switchd_ =
        launch::Process::Spawn(INCA_SWITCHD_PATH,
                               {"--listen", data_, "--control-listen", control_, "--http-listen",
                                absl::StrCat("127.0.0.1:", http_port_), "--log-level", "error"},
                               /*quiet_stdout=*/true);
    ASSERT_TRUE(launch::WaitForSwitch(data_, std::chrono::seconds(10)));
    channel_ = grpc::CreateChannel(control_, grpc::InsecureChannelCredentials());
    ASSERT_TRUE(
        channel_->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10)));
    stub_ = pb::Control::NewStub(channel_);
  }
  void Deadline(grpc::ClientContext* ctx, int ms = 2000) {
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(ms));
  }
  template <typename Req, typename Resp, typename Call>
  void Unary(RandomFields& rf, Call call, const char* name) {
    Req q;
    rf.Fill(&q);
    Resp r;
    grpc::ClientContext ctx;
    Deadline(&ctx);
    const grpc::Status s = (stub_.get()->*call)(&ctx, q, &r);
    ++codes_[s.error_code()];
    EXPECT_TRUE(Expected(s.error_code()))
        << name << " got " << s.error_code() << ": " << s.error_message() << "\nfor "
        << q.ShortDebugString().substr(0, 300);
    EXPECT_EQ(s.error_message().find('\n'), std::string::npos) << name << ": " << s.error_message();
  }

  std::string data_, control_;
  int http_port_ = 0;
  launch::Process switchd_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::Control::Stub> stub_;
  std::map<int, int> codes_;
};

TEST_F(RandomClientTest, EveryControlRequestWithRandomFieldsGetsAStatus) {
  RandomFields rf(20261202);
  using S = pb::Control::Stub;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 950 && std::chrono::steady_clock::now() - start < std::chrono::seconds(60);
       ++i) {
    switch (i % 19) {
      case 0: Unary<pb::AddRuleRequest, pb::AddRuleResponse>(rf, &S::AddRule, "AddRule"); break;
      case 1:
        Unary<pb::DeleteRuleRequest, pb::DeleteRuleResponse>(rf, &S::DeleteRule, "DeleteRule");
        break;
      case 2:
        Unary<pb::DumpRulesRequest, pb::DumpRulesResponse>(rf, &S::DumpRules, "DumpRules");
        break;
      case 3:
        Unary<pb::ListPortsRequest, pb::ListPortsResponse>(rf, &S::ListPorts, "ListPorts");
        break;
      case 4:
        Unary<pb::RegisterPortRequest, pb::RegisterPortResponse>(rf, &S::RegisterPort,
                                                                 "RegisterPort");
        break;
      case 5:
        Unary<pb::ReleasePortRequest, pb::ReleasePortResponse>(rf, &S::ReleasePort, "ReleasePort");
        break;
      case 6:
        Unary<pb::CreateGroupRequest, pb::CreateGroupResponse>(rf, &S::CreateGroup, "CreateGroup");
        break;
      case 7:
        Unary<pb::DestroyGroupRequest, pb::DestroyGroupResponse>(rf, &S::DestroyGroup,
                                                                 "DestroyGroup");
        break;
      case 8:
        Unary<pb::ListGroupsRequest, pb::ListGroupsResponse>(rf, &S::ListGroups, "ListGroups");
        break;
      case 9:
        Unary<pb::GetConfigRequest, pb::GetConfigResponse>(rf, &S::GetConfig, "GetConfig");
        break;
      case 10:
        Unary<pb::SetConfigRequest, pb::SetConfigResponse>(rf, &S::SetConfig, "SetConfig");
        break;
      case 11: Unary<pb::GetStatsRequest, pb::Stats>(rf, &S::GetStats, "GetStats"); break;
      case 12: Unary<pb::HealthRequest, pb::HealthResponse>(rf, &S::Health, "Health"); break;
      case 13:
        Unary<pb::OffloadPolicy, pb::SetOffloadPolicyResponse>(rf, &S::SetOffloadPolicy,
                                                               "SetOffloadPolicy");
        break;
      case 14:
        Unary<pb::GetOffloadPolicyRequest, pb::OffloadPolicy>(rf, &S::GetOffloadPolicy,
                                                              "GetOffloadPolicy");
        break;
      case 15:
        Unary<pb::ClusterMapping, pb::SetClusterMappingResponse>(rf, &S::SetClusterMapping,
                                                                 "SetClusterMapping");
        break;
      case 16:
        Unary<pb::DeleteClusterMappingRequest, pb::DeleteClusterMappingResponse>(
            rf, &S::DeleteClusterMapping, "DeleteClusterMapping");
        break;
      case 17:
        Unary<pb::GetOlafStatsRequest, pb::OlafStats>(rf, &S::GetOlafStats, "GetOlafStats");
        break;
      case 18: {  // the stream, read for at most 300 ms
        pb::StreamStatsRequest q;
        rf.Fill(&q);
        grpc::ClientContext ctx;
        Deadline(&ctx, 300);
        auto reader = stub_->StreamStats(&ctx, q);
        pb::Stats st;
        for (int k = 0; k < 3 && reader->Read(&st); ++k) {
        }
        ctx.TryCancel();
        const grpc::Status s = reader->Finish();
        EXPECT_TRUE(Expected(s.error_code())) << "StreamStats: " << s.error_message();
        ++codes_[s.error_code()];
        break;
      }
    }
  }
  for (const auto& [code, n] : codes_) std::printf("status %d: %d calls\n", code, n);
  EXPECT_GT(codes_[grpc::OK], 100);                // many requests were valid
  EXPECT_GT(codes_[grpc::INVALID_ARGUMENT], 100);  // and many were refused
  // Still serving, and every packet accounted for.
  pb::Stats st;
  grpc::ClientContext ctx;
  Deadline(&ctx);
  const grpc::Status last = stub_->GetStats(&ctx, pb::GetStatsRequest(), &st);
  ASSERT_TRUE(last.ok()) << last.error_code() << ": " << last.error_message();
  EXPECT_TRUE(st.conserved());
  EXPECT_TRUE(launch::WaitForSwitch(data_, std::chrono::seconds(5)));
}

TEST_F(RandomClientTest, RandomHttpRequestsGetResponses) {
  std::mt19937 rng(7);
  auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  static const char* kMethods[] = {"GET",     "POST",  "PUT",  "DELETE", "HEAD",
                                   "OPTIONS", "PATCH", "BREW", "",       "GET GET"};
  static const char* kPaths[] = {
      "/",  "/metrics", "/stats.json", "/healthz",    "/stats.json?x=1", "/../../etc/passwd",
      "//", "*",        "/%00",        "/metrics/../"};
  int answered = 0;
  constexpr int kRequests = 40;  // each may hold a worker for its 2 s read timeout
  for (int i = 0; i < kRequests; ++i) {
    std::string req =
        absl::StrCat(kMethods[pick(std::size(kMethods))], " ", kPaths[pick(std::size(kPaths))],
                     pick(4) == 0 ? std::string(pick(9000), 'A') : "",
                     pick(5) == 0 ? " HTTP/9.9\r\n" : " HTTP/1.1\r\n");
    for (size_t h = pick(6); h > 0; --h) {
      static const char* kHeaders[] = {"Host: x",
                                       "Content-Length: 5",
                                       "Content-Length: -1",
                                       "Content-Length: 99999999999",
                                       "Transfer-Encoding: chunked",
                                       "Expect: 100-continue",
                                       "X: \x01\x02",
                                       "Range: bytes=0-1,5-2"};
      absl::StrAppend(&req, kHeaders[pick(std::size(kHeaders))], "\r\n");
    }
    absl::StrAppend(&req, "\r\n");
    if (pick(3) != 0) {
      std::string body(pick(4096), '\0');
      for (char& c : body) c = static_cast<char>(pick(256));
      req += body;
    }
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    timeval tv{10, 0};  // the server's read timeout is 2 s
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    to.sin_port = htons(static_cast<uint16_t>(http_port_));
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)), 0) << "request " << i;
    (void)send(fd, req.data(), req.size(), MSG_NOSIGNAL);  // no half-close: httplib drops those
    char buf[64] = {};
    const ssize_t got = recv(fd, buf, sizeof(buf) - 1, 0);
    if (got > 0 && std::string(buf).rfind("HTTP/1.1 ", 0) == 0) ++answered;
    close(fd);
  }
  std::printf("%d of %d random requests answered with a status line\n", answered, kRequests);
  EXPECT_EQ(answered, kRequests);
  httplib::Client cli("127.0.0.1", http_port_);
  cli.set_read_timeout(5, 0);
  auto res = cli.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_NE(res->body.find("inca_switch_"), std::string::npos);
  EXPECT_TRUE(launch::WaitForSwitch(data_, std::chrono::seconds(5)));
}

}  // namespace
}  // namespace inca::integration
