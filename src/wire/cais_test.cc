#include "inca/wire/cais.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace inca::wire {
namespace {

using ::testing::HasSubstr;

// A whole datagram: serialised `h` followed by `payload_bytes` bytes.
std::vector<uint8_t> Datagram(const CaisHeader& h, size_t payload_bytes) {
  std::vector<uint8_t> d(kCaisHeaderBytes + payload_bytes);
  EXPECT_EQ(SerializeCaisHeader(h, d), kCaisHeaderBytes);
  for (size_t i = 0; i < payload_bytes; ++i) {
    d[kCaisHeaderBytes + i] = static_cast<uint8_t>(i * 7 + 1);
  }
  return d;
}

// A valid header carrying `payload_bytes` of payload.
CaisHeader Valid(uint32_t payload_bytes = 16) {
  CaisHeader h;
  h.op = CaisOp::kAllReduce;
  h.group_id = 3;
  h.layer_id = 5;
  h.chunk_id = 1;
  h.total_chunks = 4;
  h.seq_num = 42;
  h.payload_len = payload_bytes;
  h.reduce_op = ReduceOp::kSum;
  h.dtype = DType::kF32;
  return h;
}

CaisParseError Parse(const std::vector<uint8_t>& d) {
  CaisPacketView v;
  return ParseCais(d, &v);
}

// ---------------------------------------------------------------------------
// Names.

TEST(CaisToString, Enums) {
  EXPECT_EQ(ToString(CaisOp::kAllReduce), "allreduce");
  EXPECT_EQ(ToString(CaisOp::kAllGather), "allgather");
  EXPECT_EQ(ToString(CaisOp::kBroadcast), "broadcast");
  EXPECT_EQ(ToString(CaisOp::kReduceScatter), "reducescatter");
  EXPECT_EQ(ToString(static_cast<CaisOp>(9)), "unknown");
  EXPECT_EQ(ToString(ReduceOp::kSum), "sum");
  EXPECT_EQ(ToString(ReduceOp::kMax), "max");
  EXPECT_EQ(ToString(ReduceOp::kMin), "min");
  EXPECT_EQ(ToString(ReduceOp::kProduct), "product");
  EXPECT_EQ(ToString(static_cast<ReduceOp>(9)), "unknown");
  EXPECT_EQ(ToString(DType::kF32), "f32");
  EXPECT_EQ(ToString(DType::kF16), "f16");
  EXPECT_EQ(ToString(DType::kBF16), "bf16");
  EXPECT_EQ(ToString(DType::kI32), "i32");
  EXPECT_EQ(ToString(static_cast<DType>(9)), "unknown");
}

TEST(CaisToString, ParseErrors) {
  EXPECT_EQ(ToString(CaisParseError::kOk), "ok");
  EXPECT_EQ(ToString(CaisParseError::kTooShort), "too_short");
  EXPECT_EQ(ToString(CaisParseError::kBadVersion), "bad_version");
  EXPECT_EQ(ToString(CaisParseError::kUnknownOp), "unknown_op");
  EXPECT_EQ(ToString(CaisParseError::kUnknownReduceOp), "unknown_reduce_op");
  EXPECT_EQ(ToString(CaisParseError::kUnknownDType), "unknown_dtype");
  EXPECT_EQ(ToString(CaisParseError::kUnknownFlags), "unknown_flags");
  EXPECT_EQ(ToString(CaisParseError::kPayloadLenMismatch), "payload_len_mismatch");
  EXPECT_EQ(ToString(CaisParseError::kChunkOutOfRange), "chunk_out_of_range");
  EXPECT_EQ(ToString(CaisParseError::kPayloadMisaligned), "payload_misaligned");
  EXPECT_EQ(ToString(CaisParseError::kEmptyPayload), "empty_payload");
}

// ---------------------------------------------------------------------------
// Layout.

TEST(CaisLayout, KnownHeaderBytes) {
  CaisHeader h;
  h.op = CaisOp::kReduceScatter;
  h.group_id = 0xAB;
  h.layer_id = 0x0102;
  h.chunk_id = 0x0304;
  h.total_chunks = 0x0506;
  h.seq_num = 0x0708090A;
  h.payload_len = 0x0B0C0D0E;
  h.version = 1;
  h.flags = cais_flags::kResult | cais_flags::kFallback;
  h.reduce_op = ReduceOp::kMin;
  h.dtype = DType::kBF16;
  h.block = 0x7F;
  const std::array<uint8_t, kCaisHeaderBytes> expected = {
      0x03,                    // 0: op_type
      0xAB,                    // 1: group_id
      0x01, 0x02,              // 2: layer_id (BE)
      0x03, 0x04,              // 4: chunk_id (BE)
      0x05, 0x06,              // 6: total_chunks (BE)
      0x07, 0x08, 0x09, 0x0A,  // 8: seq_num (BE)
      0x0B, 0x0C, 0x0D, 0x0E,  // 12: payload_len (BE)
      0x01,                    // 16: version
      0x05,                    // 17: flags RESULT|FALLBACK
      0x22,                    // 18: reduce_op=min(2) << 4 | dtype=bf16(2)
      0x7F,                    // 19: block
  };
  std::array<uint8_t, kCaisHeaderBytes + 4> buf{};
  buf.fill(0xEE);
  ASSERT_EQ(SerializeCaisHeader(h, buf), kCaisHeaderBytes);
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), buf.begin()));
  // Nothing written past the header.
  for (size_t i = kCaisHeaderBytes; i < buf.size(); ++i) EXPECT_EQ(buf[i], 0xEE) << i;
}

TEST(CaisLayout, SerializeCaisIsTheHeaderThenThePayload) {
  CaisHeader h = Valid();
  h.payload_len = 8;
  const std::array<uint8_t, 8> payload = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<uint8_t> d = SerializeCais(h, payload);
  ASSERT_EQ(d.size(), kCaisHeaderBytes + payload.size());
  std::array<uint8_t, kCaisHeaderBytes> head{};
  ASSERT_EQ(SerializeCaisHeader(h, head), kCaisHeaderBytes);
  EXPECT_TRUE(std::equal(head.begin(), head.end(), d.begin()));
  EXPECT_TRUE(std::equal(payload.begin(), payload.end(), d.begin() + kCaisHeaderBytes));
  CaisPacketView v;
  ASSERT_EQ(ParseCais(d, &v), CaisParseError::kOk);
  EXPECT_EQ(v.payload.size(), payload.size());
  EXPECT_EQ(SerializeCais(CaisHeader{}, {}).size(), kCaisHeaderBytes);
}

TEST(CaisLayout, ReduceOpDTypeNibbles) {
  CaisHeader h = Valid();
  h.reduce_op = ReduceOp::kProduct;
  h.dtype = DType::kI32;
  std::array<uint8_t, kCaisHeaderBytes> buf{};
  ASSERT_EQ(SerializeCaisHeader(h, buf), kCaisHeaderBytes);
  EXPECT_EQ(buf[18], 0x33);
}

TEST(CaisLayout, WireHeaderOffsets) {
  EXPECT_EQ(offsetof(CaisWireHeader, op_type), 0u);
  EXPECT_EQ(offsetof(CaisWireHeader, group_id), 1u);
  EXPECT_EQ(offsetof(CaisWireHeader, layer_id), 2u);
  EXPECT_EQ(offsetof(CaisWireHeader, chunk_id), 4u);
  EXPECT_EQ(offsetof(CaisWireHeader, total_chunks), 6u);
  EXPECT_EQ(offsetof(CaisWireHeader, seq_num), 8u);
  EXPECT_EQ(offsetof(CaisWireHeader, payload_len), 12u);
  EXPECT_EQ(offsetof(CaisWireHeader, version), 16u);
  EXPECT_EQ(offsetof(CaisWireHeader, flags), 17u);
  EXPECT_EQ(offsetof(CaisWireHeader, reduce_op_dtype), 18u);
  EXPECT_EQ(offsetof(CaisWireHeader, block), 19u);
}

TEST(CaisLayout, SerializeIntoTooSmallBuffer) {
  std::array<uint8_t, kCaisHeaderBytes - 1> small{};
  EXPECT_EQ(SerializeCaisHeader(Valid(), small), 0u);
  EXPECT_EQ(SerializeCaisHeader(Valid(), std::span<uint8_t>()), 0u);
}

TEST(CaisLayout, DefaultsAndPort) {
  EXPECT_EQ(kCaisDefaultUdpPort, 9410);
  EXPECT_EQ(kCaisHeaderBytes, 20u);
  EXPECT_EQ(ElementBytes(DType::kF32), 4u);
  EXPECT_EQ(ElementBytes(DType::kF16), 2u);
  EXPECT_EQ(ElementBytes(DType::kBF16), 2u);
  EXPECT_EQ(ElementBytes(DType::kI32), 4u);
}

// ---------------------------------------------------------------------------
// Round trips.

void ExpectRoundTrip(const CaisHeader& h) {
  const std::vector<uint8_t> d = Datagram(h, h.payload_len);
  CaisPacketView v;
  ASSERT_EQ(ParseCais(d, &v), CaisParseError::kOk) << Describe(h);
  EXPECT_EQ(v.header, h) << Describe(h) << " vs " << Describe(v.header);
  EXPECT_EQ(v.payload.size(), h.payload_len);
  std::array<uint8_t, kCaisHeaderBytes> again{};
  ASSERT_EQ(SerializeCaisHeader(v.header, again), kCaisHeaderBytes);
  EXPECT_TRUE(std::equal(again.begin(), again.end(), d.begin()));
}

TEST(CaisRoundTrip, EveryOpReduceOpDType) {
  for (uint8_t op = 0; op < kCaisOpCount; ++op) {
    for (uint8_t r = 0; r < kReduceOpCount; ++r) {
      for (uint8_t t = 0; t < kDTypeCount; ++t) {
        CaisHeader h = Valid(24);
        h.op = static_cast<CaisOp>(op);
        h.reduce_op = static_cast<ReduceOp>(r);
        h.dtype = static_cast<DType>(t);
        ExpectRoundTrip(h);
      }
    }
  }
}

TEST(CaisRoundTrip, EveryFlagCombination) {
  for (uint8_t f = 0; f <= cais_flags::kKnownMask; ++f) {
    CaisHeader h = Valid(8);
    h.flags = f;
    ExpectRoundTrip(h);
    if ((f & (cais_flags::kFallback | cais_flags::kAck | cais_flags::kPending)) != 0) {
      h.payload_len = 0;
      ExpectRoundTrip(h);
    }
  }
}

TEST(CaisParse, EmptyPayloadOnlyForNoticesAcksAndRequests) {
  for (uint8_t f = 0; f <= cais_flags::kKnownMask; ++f) {
    CaisHeader h = Valid(8);
    h.flags = f;
    h.payload_len = 0;
    uint8_t buf[kCaisHeaderBytes];
    ASSERT_EQ(SerializeCaisHeader(h, buf), kCaisHeaderBytes);
    CaisPacketView v;
    const bool allowed =
        (f & (cais_flags::kFallback | cais_flags::kAck | cais_flags::kPending)) != 0 ||
        (f & (cais_flags::kRetransmit | cais_flags::kResult)) == cais_flags::kRetransmit;
    EXPECT_EQ(ParseCais(buf, &v), allowed ? CaisParseError::kOk : CaisParseError::kEmptyPayload)
        << "flags " << int{f};
  }
}

TEST(CaisRoundTrip, ExtremeFieldValues) {
  CaisHeader h = Valid(4);
  h.group_id = 0xFF;
  h.layer_id = 0xFFFF;
  h.total_chunks = 0xFFFF;
  h.chunk_id = 0xFFFE;
  h.seq_num = 0xFFFFFFFF;
  h.block = 0xFF;
  ExpectRoundTrip(h);
  h.group_id = 0;
  h.layer_id = 0;
  h.total_chunks = 1;
  h.chunk_id = 0;
  h.seq_num = 0;
  h.block = 0;
  ExpectRoundTrip(h);
}

TEST(CaisParse, PayloadSpanAliasesDatagram) {
  const std::vector<uint8_t> d = Datagram(Valid(12), 12);
  CaisPacketView v;
  ASSERT_EQ(ParseCais(d, &v), CaisParseError::kOk);
  EXPECT_EQ(v.payload.data(), d.data() + kCaisHeaderBytes);
  EXPECT_EQ(v.payload.size(), 12u);
  EXPECT_EQ(v.header.element_count(), 3u);
}

TEST(CaisParse, UnalignedDatagram) {
  // The parser must cope with a datagram at an odd address.
  const std::vector<uint8_t> d = Datagram(Valid(8), 8);
  std::vector<uint8_t> shifted(d.size() + 1);
  std::copy(d.begin(), d.end(), shifted.begin() + 1);
  CaisPacketView v;
  ASSERT_EQ(ParseCais(std::span<const uint8_t>(shifted).subspan(1), &v), CaisParseError::kOk);
  EXPECT_EQ(v.header, Valid(8));
  EXPECT_EQ(v.payload.data(), shifted.data() + 1 + kCaisHeaderBytes);
}

TEST(CaisParse, NullOutIsAllowed) {
  const std::vector<uint8_t> d = Datagram(Valid(8), 8);
  EXPECT_EQ(ParseCais(d, nullptr), CaisParseError::kOk);
}

// ---------------------------------------------------------------------------
// One test per malformed class.

TEST(CaisMalformed, TooShort) {
  EXPECT_EQ(ParseCais({}, nullptr), CaisParseError::kTooShort);
  const std::vector<uint8_t> d = Datagram(Valid(8), 8);
  for (size_t n : {size_t{0}, size_t{1}, size_t{19}}) {
    CaisPacketView v;
    EXPECT_EQ(ParseCais(std::span<const uint8_t>(d).first(n), &v), CaisParseError::kTooShort) << n;
  }
}

TEST(CaisMalformed, BadVersion) {
  for (int version : {0, 2, 0xFF}) {
    CaisHeader h = Valid();
    h.version = static_cast<uint8_t>(version);
    EXPECT_EQ(Parse(Datagram(h, 16)), CaisParseError::kBadVersion) << version;
  }
}

TEST(CaisMalformed, UnknownOp) {
  std::vector<uint8_t> d = Datagram(Valid(), 16);
  for (int op : {4, 5, 0x80, 0xFF}) {
    d[0] = static_cast<uint8_t>(op);
    EXPECT_EQ(Parse(d), CaisParseError::kUnknownOp) << op;
  }
}

TEST(CaisMalformed, UnknownReduceOp) {
  std::vector<uint8_t> d = Datagram(Valid(), 16);
  for (uint8_t r = kReduceOpCount; r < 16; ++r) {
    d[18] = static_cast<uint8_t>(r << 4);  // dtype f32
    EXPECT_EQ(Parse(d), CaisParseError::kUnknownReduceOp) << int{r};
  }
}

TEST(CaisMalformed, UnknownDType) {
  std::vector<uint8_t> d = Datagram(Valid(), 16);
  for (uint8_t t = kDTypeCount; t < 16; ++t) {
    d[18] = t;  // reduce op sum
    EXPECT_EQ(Parse(d), CaisParseError::kUnknownDType) << int{t};
  }
}

TEST(CaisMalformed, UnknownFlags) {
  for (int bit = 6; bit < 8; ++bit) {
    CaisHeader h = Valid();
    h.flags = static_cast<uint8_t>(cais_flags::kResult | (1 << bit));
    EXPECT_EQ(Parse(Datagram(h, 16)), CaisParseError::kUnknownFlags) << bit;
  }
}

TEST(CaisMalformed, PayloadLenBiggerThanDatagram) {
  CaisHeader h = Valid(100);
  EXPECT_EQ(Parse(Datagram(h, 60)), CaisParseError::kPayloadLenMismatch);
  h.payload_len = 0xFFFFFFFF;
  EXPECT_EQ(Parse(Datagram(h, 60)), CaisParseError::kPayloadLenMismatch);
}

TEST(CaisMalformed, PayloadLenSmallerThanDatagram) {
  EXPECT_EQ(Parse(Datagram(Valid(8), 12)), CaisParseError::kPayloadLenMismatch);
  // A header with payload_len 0 followed by bytes is also a mismatch.
  CaisHeader h = Valid(0);
  h.flags = cais_flags::kFallback;
  EXPECT_EQ(Parse(Datagram(h, 4)), CaisParseError::kPayloadLenMismatch);
}

TEST(CaisMalformed, ChunkIdEqualsTotalChunks) {
  CaisHeader h = Valid();
  h.chunk_id = 4;
  h.total_chunks = 4;
  EXPECT_EQ(Parse(Datagram(h, 16)), CaisParseError::kChunkOutOfRange);
  h.chunk_id = 0xFFFF;
  h.total_chunks = 0xFFFF;
  EXPECT_EQ(Parse(Datagram(h, 16)), CaisParseError::kChunkOutOfRange);
  h.chunk_id = 9;
  h.total_chunks = 4;
  EXPECT_EQ(Parse(Datagram(h, 16)), CaisParseError::kChunkOutOfRange);
}

TEST(CaisMalformed, TotalChunksZero) {
  CaisHeader h = Valid();
  h.chunk_id = 0;
  h.total_chunks = 0;
  EXPECT_EQ(Parse(Datagram(h, 16)), CaisParseError::kChunkOutOfRange);
}

TEST(CaisMalformed, PayloadMisalignedTwoByteTypes) {
  for (DType t : {DType::kF16, DType::kBF16}) {
    CaisHeader h = Valid(7);
    h.dtype = t;
    EXPECT_EQ(Parse(Datagram(h, 7)), CaisParseError::kPayloadMisaligned) << ToString(t);
    h.payload_len = 1;
    EXPECT_EQ(Parse(Datagram(h, 1)), CaisParseError::kPayloadMisaligned) << ToString(t);
    h.payload_len = 6;  // multiple of 2, not of 4: fine for 2-byte types
    EXPECT_EQ(Parse(Datagram(h, 6)), CaisParseError::kOk) << ToString(t);
  }
}

TEST(CaisMalformed, PayloadMisalignedFourByteTypes) {
  for (DType t : {DType::kF32, DType::kI32}) {
    for (uint32_t len : {1u, 2u, 3u, 6u, 10u}) {
      CaisHeader h = Valid(len);
      h.dtype = t;
      EXPECT_EQ(Parse(Datagram(h, len)), CaisParseError::kPayloadMisaligned)
          << ToString(t) << " " << len;
    }
  }
}

TEST(CaisMalformed, EmptyPayloadRejectedUnlessNoticeOrRequest) {
  for (uint8_t f : {uint8_t{0}, cais_flags::kResult,
                    static_cast<uint8_t>(cais_flags::kResult | cais_flags::kRetransmit)}) {
    CaisHeader h = Valid(0);
    h.flags = f;
    EXPECT_EQ(Parse(Datagram(h, 0)), CaisParseError::kEmptyPayload) << int{f};
  }
}

TEST(CaisMalformed, EmptyPayloadAcceptedAsResultRequest) {
  CaisHeader h = Valid(0);
  h.flags = cais_flags::kRetransmit;
  CaisPacketView v;
  ASSERT_EQ(ParseCais(Datagram(h, 0), &v), CaisParseError::kOk);
  EXPECT_TRUE(v.payload.empty());
}

TEST(CaisMalformed, EmptyPayloadAcceptedWithFallback) {
  CaisHeader h = Valid(0);
  h.flags = cais_flags::kFallback | cais_flags::kResult;
  const std::vector<uint8_t> d = Datagram(h, 0);
  ASSERT_EQ(d.size(), kCaisHeaderBytes);
  CaisPacketView v;
  ASSERT_EQ(ParseCais(d, &v), CaisParseError::kOk);
  EXPECT_EQ(v.header, h);
  EXPECT_TRUE(v.payload.empty());
  EXPECT_TRUE(v.header.has_flag(cais_flags::kFallback));
}

// ---------------------------------------------------------------------------
// Precedence when two faults coexist: the earlier CaisParseError wins.

TEST(CaisPrecedence, EarlierCheckWins) {
  // bad version + unknown op
  CaisHeader h = Valid();
  h.version = 7;
  h.op = static_cast<CaisOp>(9);
  EXPECT_EQ(Parse(Datagram(h, 16)), CaisParseError::kBadVersion);

  // unknown op + unknown reduce op + unknown dtype
  h = Valid();
  h.op = static_cast<CaisOp>(9);
  h.reduce_op = static_cast<ReduceOp>(9);
  h.dtype = static_cast<DType>(9);
  EXPECT_EQ(Parse(Datagram(h, 16)), CaisParseError::kUnknownOp);

  // unknown reduce op + unknown dtype
  h = Valid();
  h.reduce_op = static_cast<ReduceOp>(9);
  h.dtype = static_cast<DType>(9);
  EXPECT_EQ(Parse(Datagram(h, 16)), CaisParseError::kUnknownReduceOp);

  // unknown dtype + unknown flags
  h = Valid();
  h.dtype = static_cast<DType>(9);
  h.flags = 0x80;
  EXPECT_EQ(Parse(Datagram(h, 16)), CaisParseError::kUnknownDType);

  // unknown flags + payload_len mismatch
  h = Valid(16);
  h.flags = 0x80;
  EXPECT_EQ(Parse(Datagram(h, 8)), CaisParseError::kUnknownFlags);

  // payload_len mismatch + chunk out of range
  h = Valid(16);
  h.total_chunks = 0;
  EXPECT_EQ(Parse(Datagram(h, 8)), CaisParseError::kPayloadLenMismatch);

  // chunk out of range + misaligned payload
  h = Valid(6);
  h.chunk_id = 4;
  EXPECT_EQ(Parse(Datagram(h, 6)), CaisParseError::kChunkOutOfRange);

  // misaligned payload cannot coexist with an empty one; empty + chunk error
  h = Valid(0);
  h.total_chunks = 0;
  EXPECT_EQ(Parse(Datagram(h, 0)), CaisParseError::kChunkOutOfRange);

  // too short beats everything: a 19-byte prefix of a garbage header
  std::vector<uint8_t> garbage(19, 0xFF);
  EXPECT_EQ(Parse(garbage), CaisParseError::kTooShort);
}

// ---------------------------------------------------------------------------
// Status messages.

std::string StatusMessage(const std::vector<uint8_t>& d) {
  absl::StatusOr<CaisPacketView> r = ParseCaisOrStatus(d);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(r.status().message());
}

TEST(CaisStatus, OkCarriesView) {
  const std::vector<uint8_t> d = Datagram(Valid(8), 8);
  absl::StatusOr<CaisPacketView> r = ParseCaisOrStatus(d);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->header, Valid(8));
  EXPECT_EQ(r->payload.data(), d.data() + kCaisHeaderBytes);
}

TEST(CaisStatus, Messages) {
  EXPECT_THAT(StatusMessage(std::vector<uint8_t>(7, 0)),
              HasSubstr("too_short: datagram of 7 bytes is shorter than the 20-byte"));

  CaisHeader h = Valid();
  h.version = 2;
  EXPECT_THAT(StatusMessage(Datagram(h, 16)), HasSubstr("version 2 is not supported (expected 1)"));

  std::vector<uint8_t> d = Datagram(Valid(), 16);
  d[0] = 9;
  EXPECT_THAT(StatusMessage(d), HasSubstr("unknown_op: op_type 9"));

  d = Datagram(Valid(), 16);
  d[18] = 0x50;
  EXPECT_THAT(StatusMessage(d), HasSubstr("unknown_reduce_op: reduce_op 5"));
  EXPECT_THAT(StatusMessage(d), HasSubstr("byte 18 = 0x50"));

  d[18] = 0x0C;
  EXPECT_THAT(StatusMessage(d), HasSubstr("unknown_dtype: dtype 12"));

  h = Valid();
  h.flags = 0x41;
  EXPECT_THAT(StatusMessage(Datagram(h, 16)),
              HasSubstr("unknown_flags: flags 0x41 has unknown bits 0x40"));

  EXPECT_THAT(StatusMessage(Datagram(Valid(100), 60)),
              HasSubstr("payload_len 100 disagrees with datagram (60 payload bytes)"));

  h = Valid();
  h.chunk_id = 4;
  h.total_chunks = 4;
  EXPECT_THAT(StatusMessage(Datagram(h, 16)),
              HasSubstr("chunk_out_of_range: chunk_id 4 is not below total_chunks 4"));

  h = Valid(6);
  EXPECT_THAT(StatusMessage(Datagram(h, 6)),
              HasSubstr("payload_len 6 is not a multiple of the 4-byte f32 element size"));

  h = Valid(0);
  EXPECT_THAT(
      StatusMessage(Datagram(h, 0)),
      HasSubstr("empty_payload: payload_len 0 without the FALLBACK flag or a RETRANSMIT request"));
}

// ---------------------------------------------------------------------------
// Describe.

TEST(CaisDescribe, RendersFields) {
  CaisHeader h = Valid(16);
  h.flags = cais_flags::kResult | cais_flags::kRetransmit;
  h.reduce_op = ReduceOp::kMax;
  h.dtype = DType::kBF16;
  EXPECT_EQ(Describe(h),
            "cais v1 allreduce group=3 layer=5 seq=42 chunk=1/4 max/bf16 len=16 (8 elems) "
            "flags=result|retransmit block=0");
  h.flags = 0;
  EXPECT_THAT(Describe(h), HasSubstr("flags=none"));
  h.flags = 0x0D;
  EXPECT_THAT(Describe(h), HasSubstr("flags=result|fallback|declined"));
  h.flags = 0x44;
  EXPECT_THAT(Describe(h), HasSubstr("flags=fallback|0x40"));
  h.flags = 0x21;
  EXPECT_THAT(Describe(h), HasSubstr("flags=result|pending"));
}

TEST(CaisWait, LogScaleRoundTripsWithinItsStepAndSaturates) {
  EXPECT_EQ(EncodeWait(0), 0);
  EXPECT_EQ(EncodeWait(999), 0);
  EXPECT_EQ(EncodeWait(-5), 0);
  EXPECT_EQ(EncodeWait(1000), 1);
  EXPECT_EQ(DecodeWait(0), 0);
  EXPECT_EQ(DecodeWait(1), 1000);
  EXPECT_EQ(DecodeWait(17), 2000);  // one octave per 16 steps
  for (int64_t ns : {1'500, 37'000, 250'000, 1'000'000, 8'000'000, 50'000'000}) {
    const int64_t back = DecodeWait(EncodeWait(ns));
    EXPECT_LE(back, ns) << ns;
    EXPECT_GE(static_cast<double>(back), static_cast<double>(ns) / 1.045) << ns;
  }
  EXPECT_EQ(EncodeWait(int64_t{10} * 1'000'000'000), 255);  // saturates near 60 ms
  EXPECT_GT(DecodeWait(255), 55'000'000);
  EXPECT_TRUE(CarriesWait(CaisOp::kAllReduce));
  EXPECT_TRUE(CarriesWait(CaisOp::kReduceScatter));
  EXPECT_FALSE(CarriesWait(CaisOp::kAllGather));
  EXPECT_FALSE(CarriesWait(CaisOp::kBroadcast));
}

}  // namespace
}  // namespace inca::wire
