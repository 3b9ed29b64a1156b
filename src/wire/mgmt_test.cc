#include "inca/wire/mgmt.h"

#include <gtest/gtest.h>

namespace inca::wire {
namespace {

MgmtMessage Reply() {
  MgmtMessage m;
  m.type = MgmtType::kJoinReply;
  m.status = MgmtStatus::kOk;
  m.group_id = 7;
  m.nonce = 0xDEADBEEF;
  m.rank = 2;
  m.world_size = 3;
  m.port = 5;
  m.seq_base = 0x01020304;
  m.rank_ports = {4, 9, 5};
  m.window_chunks = 0x1112;
  m.lease_ms = 0x0000C350;  // 50 s
  m.shards = 4;
  m.shard = 1;
  return m;
}

TEST(MgmtTest, RoundTripAndLayout) {
  std::vector<uint8_t> b;
  SerializeMgmt(Reply(), &b);
  ASSERT_EQ(b.size(), kMgmtHeaderBytes + 6);
  EXPECT_EQ(b[0], kMgmtMagic);
  EXPECT_EQ(b[1], kMgmtVersion);
  EXPECT_EQ(b[2], 2);      // type
  EXPECT_EQ(b[4], 0xDE);   // nonce, big-endian
  EXPECT_EQ(b[8], 7);      // group
  EXPECT_EQ(b[16], 0x01);  // seq_base, big-endian
  EXPECT_EQ(b[21], 3);     // rank_port_count low byte
  EXPECT_EQ(b[22], 4);     // shards
  EXPECT_EQ(b[23], 1);     // shard
  EXPECT_EQ(b[24], 0x11);  // window_chunks, big-endian
  EXPECT_EQ(b[25], 0x12);
  for (size_t i = 26; i < 32; ++i) EXPECT_EQ(b[i], 0) << i;  // reserved
  EXPECT_EQ(b[34], 0xC3);                                    // lease_ms, big-endian
  EXPECT_EQ(b[35], 0x50);
  EXPECT_EQ(b[kMgmtHeaderBytes + 3], 9);  // second rank's port
  MgmtMessage m;
  ASSERT_TRUE(ParseMgmt(b, &m));
  EXPECT_EQ(m, Reply());
  EXPECT_TRUE(IsMgmtDatagram(b));
}

// Byte 9 is a JOIN_REPLY ok's block order and every other message's reason.
TEST(MgmtTest, AJoinReplyOkCarriesTheBlockOrderWhereOthersCarryTheReason) {
  MgmtMessage tree = Reply();
  tree.block_order = BlockOrder::kRanks;
  std::vector<uint8_t> b;
  SerializeMgmt(tree, &b);
  EXPECT_EQ(b[9], 1);
  MgmtMessage m;
  ASSERT_TRUE(ParseMgmt(b, &m));
  EXPECT_EQ(m.block_order, BlockOrder::kRanks);
  EXPECT_EQ(m.reason, MgmtReason::kNone);

  MgmtMessage refused = Reply();
  refused.status = MgmtStatus::kRefused;
  refused.reason = MgmtReason::kGroupBusy;
  refused.block_order = BlockOrder::kRanks;  // not sent: only an ok reply orders blocks
  SerializeMgmt(refused, &b);
  EXPECT_EQ(b[9], 7);
  ASSERT_TRUE(ParseMgmt(b, &m));
  EXPECT_EQ(m.reason, MgmtReason::kGroupBusy);
  EXPECT_EQ(m.block_order, BlockOrder::kPorts);
}

// Bytes 24-31 are a JOIN's job and a JOIN_REPLY's or PONG's window advice
// (then six bytes zero): a reply carries no job, a request no advice.
TEST(MgmtTest, RepliesCarryTheWindowAdviceWhereAJoinCarriesItsJob) {
  MgmtMessage join;
  join.type = MgmtType::kJoin;
  join.job = 0x1112131415161718ull;
  join.window_chunks = 9;  // not sent
  std::vector<uint8_t> b;
  SerializeMgmt(join, &b);
  EXPECT_EQ(b[24], 0x11);
  EXPECT_EQ(b[31], 0x18);
  MgmtMessage m;
  ASSERT_TRUE(ParseMgmt(b, &m));
  EXPECT_EQ(m.job, join.job);
  EXPECT_EQ(m.window_chunks, 0);

  MgmtMessage pong;
  pong.type = MgmtType::kPong;
  pong.window_chunks = 32;
  pong.job = 5;  // not sent
  SerializeMgmt(pong, &b);
  EXPECT_EQ(b[25], 32);
  ASSERT_TRUE(ParseMgmt(b, &m));
  EXPECT_EQ(m.window_chunks, 32);
  EXPECT_EQ(m.job, 0u);
  // A reply whose reserved bytes after the advice are not zero is malformed.
  b[31] = 1;
  EXPECT_FALSE(ParseMgmt(b, &m));
}

TEST(MgmtTest, MalformedIsRejected) {
  std::vector<uint8_t> good;
  SerializeMgmt(Reply(), &good);
  MgmtMessage m;
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_FALSE(ParseMgmt({good.data(), n}, &m)) << n;  // every truncation
  }
  auto bad = good;
  bad.push_back(0);  // trailing byte
  EXPECT_FALSE(ParseMgmt(bad, &m));
  bad = good;
  bad[23] = 4;  // shard index past the shard count
  EXPECT_FALSE(ParseMgmt(bad, &m));
  bad = good;
  bad[2] = static_cast<uint8_t>(MgmtType::kPong);  // shards outside a JOIN_REPLY
  EXPECT_FALSE(ParseMgmt(bad, &m));
  bad = good;
  bad[1] = 2;  // version 2: no block order
  EXPECT_FALSE(ParseMgmt(bad, &m));
  bad = good;
  bad[9] = 2;  // a JOIN_REPLY ok's block order: ports 0 or ranks 1
  EXPECT_FALSE(ParseMgmt(bad, &m));
  bad = good;
  bad[3] = static_cast<uint8_t>(MgmtStatus::kRefused);
  bad[9] = kMgmtReasonMax + 1;  // a refusal's reason
  EXPECT_FALSE(ParseMgmt(bad, &m));
  bad = good;
  bad[2] = 9;  // type
  EXPECT_FALSE(ParseMgmt(bad, &m));
  bad = good;
  bad[13] = 4;  // world_size disagrees with the port list
  EXPECT_FALSE(ParseMgmt(bad, &m));
  bad = good;
  bad[22] = 0;  // a shard index without a shard count
  EXPECT_FALSE(ParseMgmt(bad, &m));
  bad = good;
  bad[0] = 0;  // a CAIS packet, not management
  EXPECT_FALSE(ParseMgmt(bad, &m));
  EXPECT_FALSE(IsMgmtDatagram(bad));
}

TEST(MgmtTest, ReportRoundTripAndLayout) {
  MgmtMessage r;
  r.type = MgmtType::kReport;
  r.group_id = 3;
  r.rank = 0;
  r.world_size = 4;
  r.report_bytes = 0x0102030405060708ull;
  r.report_duration_us = 0x0A0B0C0D;
  r.report_path = ReportPath::kHost;
  std::vector<uint8_t> b;
  SerializeMgmt(r, &b);
  ASSERT_EQ(b.size(), kMgmtHeaderBytes + kMgmtReportBytes);
  EXPECT_EQ(b[2], 7);
  EXPECT_EQ(b[21], 0);     // no rank ports
  EXPECT_EQ(b[36], 0x01);  // bytes, big-endian
  EXPECT_EQ(b[43], 0x08);
  EXPECT_EQ(b[44], 0x0A);  // duration_us, big-endian
  EXPECT_EQ(b[48], 1);     // path: host
  MgmtMessage m;
  ASSERT_TRUE(ParseMgmt(b, &m));
  EXPECT_EQ(m, r);
  for (size_t n = 0; n < b.size(); ++n) EXPECT_FALSE(ParseMgmt({b.data(), n}, &m)) << n;
  auto bad = b;
  bad.push_back(0);
  EXPECT_FALSE(ParseMgmt(bad, &m));
  bad = b;
  bad[48] = 2;  // unknown path
  EXPECT_FALSE(ParseMgmt(bad, &m));
  bad = b;
  bad[51] = 1;  // reserved
  EXPECT_FALSE(ParseMgmt(bad, &m));
  bad = b;
  bad[21] = 1;  // a report never lists ports
  EXPECT_FALSE(ParseMgmt(bad, &m));
}

TEST(MgmtTest, NamesAreStable) {
  EXPECT_EQ(ToString(MgmtType::kReport), "report");
  EXPECT_EQ(ToString(ReportPath::kHost), "host");
  EXPECT_EQ(ToString(MgmtType::kJoin), "join");
  EXPECT_EQ(ToString(MgmtStatus::kPending), "pending");
  EXPECT_EQ(ToString(MgmtReason::kRankTaken), "rank_taken");
}

}  // namespace
}  // namespace inca::wire
