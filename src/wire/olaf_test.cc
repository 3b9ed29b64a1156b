#include "inca/wire/olaf.h"
#include "wire/olaf_test_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace inca::olaf {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

UpdateHeader SampleUpdate() {
  UpdateHeader h;
  h.cluster_id = 0x1234;
  h.worker_id = 0xA1B2C3D4;
  h.model_version = 77;
  h.gen_time_ns = 0x0102030405060708ull;
  h.merged_count = 3;
  h.update_id = 0xCAFEBABE;
  h.frag_index = 1;
  h.frag_count = 2;
  return h;
}

AckHeader SampleAck() {
  AckHeader a;
  a.queue_util = 0xABCDEF;
  a.worker_id = 9;
  a.update_id = 10;
  a.model_version = 11;
  a.aom_us = 123456;
  a.cluster_id = 3;
  a.active_clusters = 9;
  return a;
}

ModelHeader SampleModel() {
  ModelHeader m;
  m.cluster_id = 5;
  m.model_version = 42;
  m.frag_index = 0;
  m.frag_count = 3;
  m.gen_time_ns = 987654321;
  return m;
}

OlafParseError Parse(const std::vector<uint8_t>& d) {
  OlafPacket p;
  return ParseOlaf(d, &p);
}

std::string StatusMessage(const std::vector<uint8_t>& d) {
  auto s = ParseOlafOrStatus(d);
  EXPECT_FALSE(s.ok());
  return s.ok() ? "" : std::string(s.status().message());
}

TEST(OlafWireTest, UpdateLayoutIsBigEndianAtDocumentedOffsets) {
  const auto d = BuildUpdate(SampleUpdate(), F32({1.0f}));
  ASSERT_EQ(d.size(), kOlafUpdateHeaderBytes + 4);
  const std::vector<uint8_t> want = {0x4F, 0x4C, 1,    1,     // magic, version, type
                                     0,    0,    0x12, 0x34,  // flags, reserved, cluster_id
                                     0xA1, 0xB2, 0xC3, 0xD4,  // worker_id
                                     0,    0,    0,    77,    // model_version
                                     0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,  // gen_time_ns
                                     0,    0,    0,    3,      // merged_count
                                     0xCA, 0xFE, 0xBA, 0xBE,   // update_id
                                     0,    1,    0,    2,      // frag_index, frag_count
                                     0,    0,    0,    4,      // payload_len
                                     0x00, 0x00, 0x80, 0x3F};  // 1.0f little-endian
  EXPECT_EQ(d, want);
}

TEST(OlafWireTest, AckLayoutAtDocumentedOffsets) {
  std::vector<uint8_t> d(kOlafAckBytes);
  ASSERT_EQ(SerializeAck(SampleAck(), d), kOlafAckBytes);
  const std::vector<uint8_t> want = {0x4F, 0x4C, 1, 2, 0, 0xAB, 0xCD, 0xEF, 0,    0,    0, 9, 0, 0,
                                     0,    10,   0, 0, 0, 11,   0,    0x01, 0xE2, 0x40, 0, 3, 0, 9};
  EXPECT_EQ(d, want);
}

TEST(OlafWireTest, ModelLayoutAtDocumentedOffsets) {
  const auto d = BuildModel(SampleModel(), F32({2.0f}));
  const std::vector<uint8_t> want = {0x4F, 0x4C, 1, 3, 0, 0, 0, 5, 0, 0,    0,
                                     42,   0,    0, 0, 3, 0, 0, 0, 0, 0x3A, 0xDE,
                                     0x68, 0xB1, 0, 0, 0, 4, 0, 0, 0, 0x40};
  EXPECT_EQ(d, want);
}

TEST(OlafWireTest, RoundTripsEveryType) {
  const auto payload = F32({1.5f, -2.0f, 3.25f});
  {
    const auto d = BuildUpdate(SampleUpdate(), payload);
    OlafPacket p;
    ASSERT_EQ(ParseOlaf(d, &p), OlafParseError::kOk);
    EXPECT_EQ(p.type, OlafType::kUpdate);
    UpdateHeader want = SampleUpdate();
    want.payload_len = 12;
    EXPECT_EQ(p.update, want);
    EXPECT_EQ(p.payload.data(), d.data() + kOlafUpdateHeaderBytes);
    EXPECT_EQ(p.payload.size(), 12u);
    EXPECT_THAT(Describe(p), HasSubstr("update cluster=4660"));
  }
  {
    std::vector<uint8_t> d(kOlafAckBytes);
    SerializeAck(SampleAck(), d);
    OlafPacket p;
    ASSERT_EQ(ParseOlaf(d, &p), OlafParseError::kOk);
    EXPECT_EQ(p.type, OlafType::kAck);
    EXPECT_EQ(p.ack, SampleAck());
    EXPECT_TRUE(p.payload.empty());
  }
  {
    const auto d = BuildModel(SampleModel(), payload);
    auto p = ParseOlafOrStatus(d);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->type, OlafType::kModel);
    ModelHeader want = SampleModel();
    want.payload_len = 12;
    EXPECT_EQ(p->model, want);
  }
}

TEST(OlafWireTest, NotOlaf) {
  EXPECT_EQ(Parse({}), OlafParseError::kNotOlaf);
  EXPECT_EQ(Parse({0x4F}), OlafParseError::kNotOlaf);
  EXPECT_EQ(Parse({0x4F, 0x4D, 1, 1}), OlafParseError::kNotOlaf);
  EXPECT_FALSE(HasOlafMagic(std::vector<uint8_t>{0x00, 0x4C}));
  EXPECT_TRUE(HasOlafMagic(std::vector<uint8_t>{0x4F, 0x4C}));
  EXPECT_THAT(StatusMessage({0x45, 0x00}), StartsWith("not_olaf: magic 0x45 0x00"));
}

TEST(OlafWireTest, EveryErrorClassIsDetectedAndNamed) {
  const auto good = BuildUpdate(SampleUpdate(), F32({1.0f, 2.0f}));
  struct Case {
    std::vector<uint8_t> bytes;
    OlafParseError error;
    std::string message;
  };
  std::vector<Case> cases;
  cases.push_back({{0x4F, 0x4C, 1}, OlafParseError::kTooShort, "4-byte OLAF prefix"});
  cases.push_back({std::vector<uint8_t>(good.begin(), good.begin() + 39), OlafParseError::kTooShort,
                   "40-byte OLAF update header"});
  auto v = good;
  v[2] = 2;
  cases.push_back({v, OlafParseError::kBadVersion, "version 2"});
  v = good;
  v[3] = 4;
  cases.push_back({v, OlafParseError::kUnknownType, "type 4"});
  v = good;
  v[3] = 0;
  cases.push_back({v, OlafParseError::kUnknownType, "type 0"});
  v = good;
  v[4] = 0x80;
  cases.push_back({v, OlafParseError::kUnknownFlags, "flags 0x80"});
  v = good;
  v.push_back(0);
  cases.push_back({v, OlafParseError::kPayloadLenMismatch, "payload_len 8 disagrees"});
  {
    UpdateHeader h = SampleUpdate();
    const auto full = BuildUpdate(h, F32({1.0f}));
    std::vector<uint8_t> d(full.begin(), full.begin() + kOlafUpdateHeaderBytes + 2);
    d[39] = 2;  // payload_len 2
    cases.push_back({d, OlafParseError::kPayloadMisaligned, "payload_len 2"});
    auto e = BuildUpdate(h, {});
    cases.push_back({e, OlafParseError::kEmptyPayload, "payload_len 0"});
    h.frag_index = 2;
    h.frag_count = 2;
    cases.push_back({BuildUpdate(h, F32({1.0f})), OlafParseError::kFragmentOutOfRange,
                     "frag_index 2 is not below frag_count 2"});
    h.frag_index = 0;
    h.frag_count = 0;
    cases.push_back(
        {BuildUpdate(h, F32({1.0f})), OlafParseError::kFragmentOutOfRange, "frag_count 0"});
    h.frag_count = 1;
    h.merged_count = 0;
    cases.push_back(
        {BuildUpdate(h, F32({1.0f})), OlafParseError::kZeroMergedCount, "merged_count 0"});
  }
  {
    std::vector<uint8_t> a(kOlafAckBytes);
    SerializeAck(SampleAck(), a);
    auto longer = a;
    longer.push_back(0);
    cases.push_back({longer, OlafParseError::kPayloadLenMismatch, "exactly 28 bytes"});
    auto flagged = a;
    flagged[4] = kUpdateFlagPsClock;  // PS_CLOCK is an UPDATE flag only
    cases.push_back({flagged, OlafParseError::kUnknownFlags, "known mask 0x00"});
    a.pop_back();
    cases.push_back({a, OlafParseError::kTooShort, "28-byte OLAF ack header"});
  }
  {
    UpdateHeader h = SampleUpdate();
    h.flags = kUpdateFlagPsClock | 0x02;
    cases.push_back({BuildUpdate(h, F32({1.0f})), OlafParseError::kUnknownFlags,
                     "flags 0x03 has unknown bits (known mask 0x01)"});
    h.flags = kUpdateFlagPsClock;
    const auto ok = BuildUpdate(h, F32({1.0f}));
    EXPECT_EQ(Parse(ok), OlafParseError::kOk);
  }
  {
    ModelHeader m = SampleModel();
    cases.push_back({BuildModel(m, {}), OlafParseError::kEmptyPayload, "model carries"});
    m.frag_index = 3;
    cases.push_back(
        {BuildModel(m, F32({1.0f})), OlafParseError::kFragmentOutOfRange, "frag_index 3"});
  }
  std::map<OlafParseError, int> seen;
  for (const Case& c : cases) {
    EXPECT_EQ(Parse(c.bytes), c.error) << c.message;
    const std::string m = StatusMessage(c.bytes);
    EXPECT_THAT(m, StartsWith(std::string(ToString(c.error)) + ": "));
    EXPECT_THAT(m, HasSubstr(c.message));
    ++seen[c.error];
  }
  // Every error class except kOk and kNotOlaf (tested above) is covered.
  EXPECT_EQ(seen.size(), kOlafParseErrorCount - 2);
}

// The example in docs/protocol.md (OLAF section).
TEST(OlafWireTest, ProtocolDocExample) {
  UpdateHeader h;
  h.gen_time_ns = 1'000'000'000;
  h.update_id = 7;
  const auto d = BuildUpdate(h, F32({1.0f}));
  const std::vector<uint8_t> want = {
      0x4f, 0x4c, 0x01, 0x01, 0x00, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x00, 0x00, 0x00, 0x00, 0x00, 0x3b, 0x9a, 0xca, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00,
      0x00, 0x07, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x80, 0x3f};
  EXPECT_EQ(d, want);
}

TEST(OlafWireTest, SerializersRefuseSmallBuffers) {
  std::vector<uint8_t> small(kOlafAckBytes - 1);
  EXPECT_EQ(SerializeAck(SampleAck(), small), 0u);
  EXPECT_EQ(SerializeUpdateHeader(SampleUpdate(), small), 0u);
  EXPECT_EQ(SerializeModelHeader(SampleModel(), small), 0u);
}

TEST(OlafWireTest, ReservedByteRoundTrips) {
  UpdateHeader h = SampleUpdate();
  h.reserved = 0x5A;
  const auto d = BuildUpdate(h, F32({1.0f}));
  OlafPacket p;
  ASSERT_EQ(ParseOlaf(d, &p), OlafParseError::kOk);
  EXPECT_EQ(p.update.reserved, 0x5A);
}

// Writes the seed corpora for olaf_wire_fuzz and olaf_switch_fuzz when
// INCA_OLAF_WRITE_CORPUS names the source tree's root (src/wire/corpus/olaf,
// src/olaf/corpus/switch). Otherwise
// only checks that the seeds have the intended parse results.
void WriteFile(const std::filesystem::path& p, const std::vector<uint8_t>& b) {
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

// One record of switch_fuzz.cc: [port u8][time step u8][len u16 LE][bytes].
void AppendRecord(std::vector<uint8_t>& rec, uint8_t port, uint8_t step,
                  const std::vector<uint8_t>& d) {
  rec.push_back(port);
  rec.push_back(step);
  rec.push_back(static_cast<uint8_t>(d.size()));
  rec.push_back(static_cast<uint8_t>(d.size() >> 8));
  rec.insert(rec.end(), d.begin(), d.end());
}

TEST(OlafCorpus, SeedsParseAsIntended) {
  std::map<std::string, std::vector<uint8_t>> wire;
  UpdateHeader h = SampleUpdate();
  wire["ok_update"] = BuildUpdate(h, F32({1.0f, -2.0f, 0.5f, 8.0f}));
  h.worker_id = 0;
  h.cluster_id = kUnassignedCluster;
  h.frag_index = 0;
  h.frag_count = 1;
  wire["ok_update_unstamped"] = BuildUpdate(h, F32({3.0f}));
  std::vector<uint8_t> ack(kOlafAckBytes);
  SerializeAck(SampleAck(), ack);
  wire["ok_ack"] = ack;
  wire["ok_model"] = BuildModel(SampleModel(), F32({1.0f, 2.0f}));
  wire["err_not_olaf"] = {0x45, 0x00, 0x00, 0x1C};
  wire["err_too_short"] = {0x4F, 0x4C, 1};
  auto bad = wire["ok_update"];
  bad[2] = 9;
  wire["err_bad_version"] = bad;
  bad = wire["ok_update"];
  bad[3] = 7;
  wire["err_unknown_type"] = bad;
  bad = wire["ok_model"];
  bad.push_back(1);
  wire["err_payload_len_mismatch"] = bad;
  for (const auto& [name, bytes] : wire) {
    EXPECT_EQ(Parse(bytes) == OlafParseError::kOk, name.rfind("ok_", 0) == 0) << name;
  }

  // Switch scenario seeds: ports 1..3 workers (flows bound by the fuzzer),
  // port 0 the PS.
  std::map<std::string, std::vector<uint8_t>> sw;
  std::vector<uint8_t> rec;
  for (uint8_t i = 0; i < 12; ++i) {
    UpdateHeader u;
    u.cluster_id = static_cast<uint16_t>(i % 3);
    u.update_id = i;
    u.gen_time_ns = i * 10u;
    AppendRecord(rec, static_cast<uint8_t>(1 + i % 3), 3, BuildUpdate(u, F32({1.0f, 2.0f})));
  }
  AckHeader a = SampleAck();
  a.worker_id = 0;
  std::vector<uint8_t> ack0(kOlafAckBytes);
  SerializeAck(a, ack0);
  AppendRecord(rec, 0, 50, ack0);
  ModelHeader m = SampleModel();
  m.cluster_id = kAllClusters;
  AppendRecord(rec, 0, 1, BuildModel(m, F32({4.0f})));
  AppendRecord(rec, 2, 1, {1, 2, 3, 4, 5});
  sw["updates_ack_model_passthrough"] = rec;
  rec.clear();
  for (uint8_t i = 0; i < 30; ++i) {
    UpdateHeader u;
    u.worker_id = 100u + i % 5;
    u.cluster_id = static_cast<uint16_t>(i % 9);
    u.gen_time_ns = 0;
    AppendRecord(rec, static_cast<uint8_t>(1 + i % 4), 0, BuildUpdate(u, F32({0.5f})));
  }
  AppendRecord(rec, 1, 255, BuildUpdate(UpdateHeader{}, F32({1.0f})));
  sw["flood_nine_clusters_then_stale"] = rec;

  const char* dir = std::getenv("INCA_OLAF_WRITE_CORPUS");
  if (dir == nullptr) return;
  const std::filesystem::path root(dir);
  const std::filesystem::path wire_dir = root / "src/wire/corpus/olaf";
  const std::filesystem::path switch_dir = root / "src/olaf/corpus/switch";
  std::filesystem::create_directories(wire_dir);
  std::filesystem::create_directories(switch_dir);
  for (const auto& [name, bytes] : wire) WriteFile(wire_dir / name, bytes);
  for (const auto& [name, bytes] : sw) WriteFile(switch_dir / name, bytes);
}

}  // namespace
}  // namespace inca::olaf
