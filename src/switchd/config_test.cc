#include "switchd/config.h"

#include <unistd.h>

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "util/file.h"

namespace inca::switchd {
namespace {

using ::testing::HasSubstr;

// Writes `text` to a fresh file under the test temp dir; removed on exit.
class TempYaml {
 public:
  explicit TempYaml(const std::string& text) {
    static int counter = 0;
    path_ = ::testing::TempDir() + "switchd_config_test_" + std::to_string(::getpid()) + "_" +
            std::to_string(counter++) + ".yaml";
    std::ofstream(path_) << text;
  }
  ~TempYaml() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

absl::StatusOr<SwitchdConfig> Load(const std::string& text) {
  TempYaml f(text);
  return LoadSwitchdConfigYaml(f.path());
}

std::string Error(const std::string& text) {
  auto c = Load(text);
  EXPECT_FALSE(c.ok()) << "accepted:\n" << text;
  if (c.ok()) return "";
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << c.status();
  return std::string(c.status().message());
}

TEST(SwitchdConfigTest, DefaultsAreValid) {
  SwitchdConfig c;
  EXPECT_TRUE(c.Validate().ok());
  EXPECT_EQ(c.listen, "127.0.0.1:9410");
  EXPECT_EQ(c.socket_buffer_bytes, size_t{8} << 20);
  EXPECT_EQ(c.batch_size, 64u);
  auto empty = Load("");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->listen, "127.0.0.1:9410");
  EXPECT_EQ(empty->cais.max_payload_bytes, SwitchdConfig{}.cais.max_payload_bytes);
}

TEST(SwitchdConfigTest, ParsesEveryKey) {
  auto c = Load(R"(
listen: "[::1]:9500"
sram_bytes: 4194304
sram_usage_limit: 0.5
max_pending_chunks: 32
chunk_size: 1024
timeout_ms: 20
result_hold_ms: 2.5
deterministic: true
socket_buffer_bytes: 1048576
batch_size: 16
ingress_loss: 0.01
egress_loss: 1.0
loss_seed: 18446744073709551615
log_level: debug
stats_interval_s: 5
control_listen: 0.0.0.0:50052
http_listen: "off"
offload_controller: external
offload_host_gbps: 25
offload_host_latency_us: 40
offload_switch_gbps: 100
offload_measured: false
offload_explore_ms: 2500
ports:
  - {port: 1, endpoint: "127.0.0.1:9501"}
  - port: 2
    endpoint: "[::1]:9502"
rules:
  - group_id: 3
    layer_id: "*"
    chunk_id: 7
    input_ports: [1, 2]
    output_ports: [2]
    op_type: reducescatter
  - {group_id: 4, layer_id: 12, input_ports: [1], op_type: any}
  - {group_id: 4, layer_id: 13, op_type: any, host_path: true}
  - {group_id: 5, input_ports: [1, 2], op_type: any, uplink: 9}
)");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->listen, "[::1]:9500");
  EXPECT_EQ(c->cais.sram_bytes, 4194304u);
  EXPECT_DOUBLE_EQ(c->cais.sram_usage_limit, 0.5);
  EXPECT_EQ(c->cais.max_pending_chunks, 32u);
  EXPECT_EQ(c->cais.max_payload_bytes, 1024u);
  EXPECT_EQ(c->cais.timeout_ns, 20 * dp::kNsPerMs);
  EXPECT_EQ(c->cais.result_hold_ns, 2'500'000);
  EXPECT_TRUE(c->cais.deterministic);
  EXPECT_EQ(c->socket_buffer_bytes, 1048576u);
  EXPECT_EQ(c->batch_size, 16u);
  EXPECT_DOUBLE_EQ(c->ingress_loss, 0.01);
  EXPECT_DOUBLE_EQ(c->egress_loss, 1.0);
  EXPECT_EQ(c->loss_seed, UINT64_MAX);
  EXPECT_EQ(c->log_level, "debug");
  EXPECT_DOUBLE_EQ(c->stats_interval_s, 5);
  EXPECT_EQ(c->control_listen, "0.0.0.0:50052");
  EXPECT_EQ(c->http_listen, "off");
  EXPECT_EQ(c->offload_controller, "external");
  EXPECT_DOUBLE_EQ(c->offload_host_gbps, 25);
  EXPECT_DOUBLE_EQ(c->offload_host_latency_us, 40);
  EXPECT_DOUBLE_EQ(c->offload_switch_gbps, 100);
  EXPECT_FALSE(c->offload_measured);
  EXPECT_DOUBLE_EQ(c->offload_explore_ms, 2500);
  ASSERT_EQ(c->ports.size(), 2u);
  EXPECT_EQ(c->ports[0].port, 1);
  EXPECT_EQ(c->ports[0].endpoint, "127.0.0.1:9501");
  EXPECT_EQ(c->ports[1].endpoint, "[::1]:9502");
  ASSERT_EQ(c->rules.size(), 4u);
  EXPECT_EQ(c->rules[3].uplink, dp::PortId{9});
  EXPECT_FALSE(c->rules[0].uplink.has_value());
  const cais::Rule& a = c->rules[0];
  EXPECT_EQ(a.key, (cais::RuleKey{3, std::nullopt, uint16_t{7}}));
  EXPECT_EQ(a.input_ports, (cais::PortMask{1, 2}));
  EXPECT_EQ(a.output_ports, (cais::PortMask{2}));
  EXPECT_EQ(a.op, wire::CaisOp::kReduceScatter);
  const cais::Rule& b = c->rules[1];
  EXPECT_EQ(b.key, (cais::RuleKey{4, uint16_t{12}, std::nullopt}));
  EXPECT_EQ(b.output_ports, b.input_ports);  // defaults to the inputs
  EXPECT_FALSE(b.op.has_value());
  EXPECT_FALSE(b.host_path);
  const cais::Rule& h = c->rules[2];
  EXPECT_TRUE(h.host_path);  // a policy rule needs no ports
  EXPECT_TRUE(h.input_ports.empty());
  EXPECT_THAT(Error("rules:\n  - {group_id: 4, layer_id: 13, host_path: maybe}\n"),
              HasSubstr("host_path"));
  EXPECT_THAT(Error("rules:\n  - {group_id: 4, input_ports: [1], uplink: 1024}\n"),
              HasSubstr("uplink"));
}

TEST(SwitchdConfigTest, MaxPayloadBytesIsChunkSize) {
  auto c = Load("max_payload_bytes: 2048\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->cais.max_payload_bytes, 2048u);
  EXPECT_THAT(Error("chunk_size: 1024\nmax_payload_bytes: 1024\n"), HasSubstr("give one"));
}

TEST(SwitchdConfigTest, ExampleFileLoads) {
  auto c = LoadSwitchdConfigYaml(INCA_SWITCHD_EXAMPLE_CONFIG);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->listen, "127.0.0.1:9410");
  EXPECT_EQ(c->offload_controller, "embedded");
}

TEST(SwitchdConfigTest, ThreadsAreForTheCaisProgramAndEachShardGetsAChunk) {
  EXPECT_THAT(Error("threads: 0\n"), HasSubstr("threads"));
  EXPECT_THAT(Error("threads: 65\n"), HasSubstr("threads"));
  EXPECT_THAT(Error("program: olaf\nthreads: 2\n"), HasSubstr("cais program only"));
  EXPECT_THAT(Error("threads: 4\nsram_bytes: 80000\n"), HasSubstr("each shard's 20000 bytes"));
  EXPECT_TRUE(Load("threads: 4\nsram_bytes: 100000\n").ok());
}

TEST(SwitchdConfigTest, OffloadKeysAreValidated) {
  EXPECT_THAT(Error("offload_controller: sometimes\n"), HasSubstr("use embedded, external or off"));
  EXPECT_THAT(Error("offload_host_gbps: 0\n"), HasSubstr("offload_host_gbps"));
  EXPECT_THAT(Error("offload_host_latency_us: -1\n"), HasSubstr("offload_host_latency_us"));
  EXPECT_THAT(Error("offload_explore_ms: 0\n"), HasSubstr("offload_explore_ms"));
  EXPECT_THAT(Error("offload_measured: maybe\n"), HasSubstr("offload_measured"));
}

TEST(SwitchdConfigTest, UnknownKeysAreRejected) {
  EXPECT_THAT(Error("timeout: 5\n"), HasSubstr("unknown key 'timeout'"));
  EXPECT_THAT(Error("timeout: 5\n"), HasSubstr("line 1"));
  EXPECT_THAT(Error("timeout: 5\n"), HasSubstr("timeout_ms"));  // lists the known keys
  EXPECT_THAT(Error("ports:\n  - {port: 1, endpoint: \"1.2.3.4:5\", weight: 2}\n"),
              HasSubstr("unknown key 'weight' in ports[0]"));
  EXPECT_THAT(Error("rules:\n  - {group_id: 1, input_ports: [1], ops: any}\n"),
              HasSubstr("unknown key 'ops' in rules[0]"));
  EXPECT_THAT(Error("batch_size: 4\nbatch_size: 8\n"), HasSubstr("duplicate key 'batch_size'"));
}

TEST(SwitchdConfigTest, WrongTypesNameTheKey) {
  EXPECT_THAT(Error("timeout_ms: soon\n"), HasSubstr("key 'timeout_ms'"));
  EXPECT_THAT(Error("timeout_ms: soon\n"), HasSubstr("expected a number, got 'soon'"));
  EXPECT_THAT(Error("batch_size: 1.5\n"), HasSubstr("key 'batch_size'"));
  EXPECT_THAT(Error("batch_size: -3\n"), HasSubstr("must not be negative"));
  EXPECT_THAT(Error("deterministic: maybe\n"), HasSubstr("key 'deterministic'"));
  EXPECT_THAT(Error("listen: [1, 2]\n"), HasSubstr("key 'listen'"));
  EXPECT_THAT(Error("listen: localhost\n"), HasSubstr("missing ':PORT'"));
  EXPECT_THAT(Error("ports: 3\n"), HasSubstr("key 'ports'"));
  EXPECT_THAT(Error("ports:\n  - 3\n"), HasSubstr("ports[0]"));
  EXPECT_THAT(Error("ports:\n  - {port: 1}\n"), HasSubstr("needs both"));
  EXPECT_THAT(Error("ports:\n  - {port: 1, endpoint: nowhere}\n"),
              HasSubstr("key 'ports[0].endpoint'"));
  EXPECT_THAT(Error("rules:\n  - {group_id: 1, input_ports: 1}\n"),
              HasSubstr("key 'rules[0].input_ports'"));
  EXPECT_THAT(Error("rules:\n  - {group_id: 1, input_ports: [x]}\n"),
              HasSubstr("key 'rules[0].input_ports[0]'"));
  EXPECT_THAT(Error("rules:\n  - {group_id: 1, layer_id: any, input_ports: [1]}\n"),
              HasSubstr("key 'rules[0].layer_id'"));
  EXPECT_THAT(Error("rules:\n  - {group_id: 1, input_ports: [1], op_type: sum}\n"),
              HasSubstr("unknown op_type 'sum'"));
  EXPECT_THAT(Error("rules:\n  - {input_ports: [1]}\n"), HasSubstr("needs 'group_id'"));
  EXPECT_THAT(Error("log_level: loud\n"), HasSubstr("unknown value 'loud'"));
  EXPECT_THAT(Error("- 1\n- 2\n"), HasSubstr("expected a mapping"));
  EXPECT_THAT(Error("sram_bytes: [\n"), HasSubstr("YAML error"));
  EXPECT_THAT(Error("timeout_ms:\n"), HasSubstr("got nothing"));
}

TEST(SwitchdConfigTest, OutOfRangeValuesNameTheKey) {
  EXPECT_THAT(Error("sram_usage_limit: 0\n"), HasSubstr("key 'sram_usage_limit'"));
  EXPECT_THAT(Error("sram_usage_limit: 1.5\n"), HasSubstr("out of range (0, 1]"));
  EXPECT_THAT(Error("max_pending_chunks: 0\n"), HasSubstr("key 'max_pending_chunks'"));
  EXPECT_THAT(Error("chunk_size: 1022\n"), HasSubstr("multiple of 4"));
  EXPECT_THAT(Error("chunk_size: 70000\n"), HasSubstr("key 'chunk_size'"));
  EXPECT_THAT(Error("timeout_ms: 0\n"), HasSubstr("key 'timeout_ms'"));
  EXPECT_THAT(Error("result_hold_ms: -1\n"), HasSubstr("key 'result_hold_ms'"));
  EXPECT_THAT(Error("batch_size: 0\n"), HasSubstr("key 'batch_size'"));
  EXPECT_THAT(Error("batch_size: 5000\n"), HasSubstr("out of range [1, 1024]"));
  EXPECT_THAT(Error("ingress_loss: 1.01\n"), HasSubstr("key 'ingress_loss'"));
  EXPECT_THAT(Error("egress_loss: -0.1\n"), HasSubstr("key 'egress_loss'"));
  EXPECT_THAT(Error("stats_interval_s: -1\n"), HasSubstr("key 'stats_interval_s'"));
  EXPECT_THAT(Error("socket_buffer_bytes: 99999999999\n"), HasSubstr("key 'socket_buffer_bytes'"));
  EXPECT_THAT(Error("ports:\n  - {port: 1024, endpoint: \"1.2.3.4:5\"}\n"),
              HasSubstr("key 'ports[0].port'"));
  EXPECT_THAT(Error("rules:\n  - {group_id: 256, input_ports: [1]}\n"),
              HasSubstr("key 'rules[0].group_id'"));
  EXPECT_THAT(Error("rules:\n  - {group_id: 1, input_ports: [1024]}\n"),
              HasSubstr("key 'rules[0].input_ports[0]'"));
  EXPECT_THAT(Error("rules:\n  - {group_id: 1, chunk_id: 65536, input_ports: [1]}\n"),
              HasSubstr("key 'rules[0].chunk_id'"));
  EXPECT_THAT(Error("rules:\n  - {group_id: 1, input_ports: []}\n"), HasSubstr("at least one"));
}

TEST(SwitchdConfigTest, CrossFieldValidation) {
  // CaisConfig::Validate: the slot memory must hold a cell of 2 x payload.
  EXPECT_THAT(Error("sram_bytes: 1000\nchunk_size: 8192\n"), HasSubstr("sram_bytes"));
  EXPECT_THAT(Error("ports:\n  - {port: 1, endpoint: \"1.2.3.4:5\"}\n"
                    "  - {port: 1, endpoint: \"1.2.3.4:6\"}\n"),
              HasSubstr("listed twice"));
  EXPECT_THAT(Error("ports:\n  - {port: 1, endpoint: \"1.2.3.4:5\"}\n"
                    "  - {port: 2, endpoint: \"1.2.3.4:5\"}\n"),
              HasSubstr("listed twice"));
  EXPECT_THAT(Error("rules:\n  - {group_id: 1, input_ports: [1]}\n"
                    "  - {group_id: 1, input_ports: [2]}\n"),
              HasSubstr("rules[1]"));
}

TEST(SwitchdConfigTest, ValidateCatchesBadValuesSetInCode) {
  SwitchdConfig c;
  c.batch_size = 0;
  EXPECT_FALSE(c.Validate().ok());
  c = SwitchdConfig{};
  c.ingress_loss = 2;
  EXPECT_THAT(std::string(c.Validate().message()), HasSubstr("ingress_loss"));
  c = SwitchdConfig{};
  c.listen = "nowhere";
  EXPECT_THAT(std::string(c.Validate().message()), HasSubstr("listen"));
  c = SwitchdConfig{};
  c.cais.timeout_ns = 0;
  EXPECT_FALSE(c.Validate().ok());
  // Issue 46: the listeners' addresses are checked with everything else,
  // before anything starts ("off" and port 0 stay valid).
  c = SwitchdConfig{};
  c.control_listen = "garbage";
  EXPECT_THAT(std::string(c.Validate().message()), HasSubstr("control_listen"));
  c = SwitchdConfig{};
  c.http_listen = "127.0.0.1:99999";
  EXPECT_THAT(std::string(c.Validate().message()), HasSubstr("http_listen"));
  c = SwitchdConfig{};
  c.control_listen = "off";
  c.http_listen = "[::1]:0";
  EXPECT_TRUE(c.Validate().ok()) << c.Validate();
  c = SwitchdConfig{};
  c.log_level = "verbose";
  EXPECT_FALSE(c.Validate().ok());
  c = SwitchdConfig{};
  c.ports.push_back({1100, "1.2.3.4:5"});
  EXPECT_FALSE(c.Validate().ok());
}

TEST(SwitchdConfigTest, MissingFileIsNotFound) {
  auto c = LoadSwitchdConfigYaml("/nonexistent/switchd.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("/nonexistent/switchd.yaml"));
}

// Issue 46: --config /dev/zero read forever, and a file that cannot be
// read (/proc/self/mem: EIO) started the switch with the defaults. Both
// are one error now, and so is a directory.
TEST(SwitchdConfigTest, EndlessUnreadableAndDirectoryConfigsAreErrors) {
  auto zero = LoadSwitchdConfigYaml("/dev/zero");
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(zero.status().message()),
              HasSubstr("config file /dev/zero is larger than 1048576 bytes"));
  auto mem = LoadSwitchdConfigYaml("/proc/self/mem");
  ASSERT_FALSE(mem.ok());
  EXPECT_THAT(std::string(mem.status().message()),
              HasSubstr("cannot read config file /proc/self/mem"));
  auto dir = LoadSwitchdConfigYaml("/tmp");
  ASSERT_FALSE(dir.ok());
  EXPECT_THAT(std::string(dir.status().message()), HasSubstr("is a directory"));
  // A config just under the bound still loads.
  std::string big = "timeout_ms: 7\n";
  big.append(util::kMaxConfigFileBytes - big.size() - 1, '#');
  big += "\n";
  auto ok = Load(big);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->cais.timeout_ns, 7 * dp::kNsPerMs);
}

TEST(SwitchdConfigTest, ApplyLayersOverExistingValues) {
  SwitchdConfig c;
  c.batch_size = 8;
  ASSERT_TRUE(ApplySwitchdConfigYaml("timeout_ms: 7\n", "inline", &c).ok());
  EXPECT_EQ(c.batch_size, 8u);
  EXPECT_EQ(c.cais.timeout_ns, 7 * dp::kNsPerMs);
  absl::Status s = ApplySwitchdConfigYaml("bogus: 1\n", "inline", &c);
  EXPECT_THAT(std::string(s.message()), HasSubstr("inline: unknown key 'bogus'"));
}

TEST(SwitchdConfigTest, OpTypeNames) {
  EXPECT_EQ(*ParseOpType("allreduce"), wire::CaisOp::kAllReduce);
  EXPECT_EQ(*ParseOpType("allgather"), wire::CaisOp::kAllGather);
  EXPECT_EQ(*ParseOpType("broadcast"), wire::CaisOp::kBroadcast);
  EXPECT_EQ(*ParseOpType("reducescatter"), wire::CaisOp::kReduceScatter);
  EXPECT_FALSE(ParseOpType("any")->has_value());
  EXPECT_FALSE(ParseOpType("AllReduce").ok());
}

}  // namespace
}  // namespace inca::switchd
