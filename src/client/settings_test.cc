// The client's settings are declared once (src/client/settings.cc): the
// reference page is what the table generates, Validate() and the bindings'
// setter check each value against it, and cais-perf's flags follow from it.
#include "client/settings.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

#include <fstream>
#include <set>
#include <sstream>

namespace inca::client {
namespace {

using ::testing::HasSubstr;

TEST(ClientSettingsTest, DocsClientSettingsMdIsTheGeneratedReference) {
  std::ifstream in(INCA_CLIENT_SETTINGS_DOC);
  ASSERT_TRUE(in) << INCA_CLIENT_SETTINGS_DOC;
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), ClientSettingsMarkdown())
      << "docs/client-settings.md is stale: build/release/bin/cais-perf --settings-markdown > "
         "docs/client-settings.md";
}

TEST(ClientSettingsTest, KeysAreUniqueAndEveryDefaultIsInRange) {
  std::set<std::string> names;
  for (const auto& s : ClientSettings()) {
    EXPECT_TRUE(names.insert(s.spec.key).second) << s.spec.key;
    for (const std::string& a : s.spec.aliases) EXPECT_TRUE(names.insert(a).second) << a;
    EXPECT_FALSE(s.spec.doc.empty()) << s.spec.key;
    EXPECT_TRUE(settings::Check(s.spec, s.get(CommunicatorOptions{})).ok()) << s.spec.key;
  }
  EXPECT_TRUE(CommunicatorOptions{}.Validate().ok());
}

TEST(ClientSettingsTest, ValidateRefusesEachOutOfRangeValueNamingTheKey) {
  CommunicatorOptions o;
  o.max_pending_chunks = 0;
  EXPECT_THAT(std::string(o.Validate().message()),
              HasSubstr("max_pending_chunks: value 0 out of range [1, 65535]"));
  o = {};
  o.pacing_gain = 101;
  EXPECT_THAT(std::string(o.Validate().message()), HasSubstr("pacing_gain"));
  o = {};
  o.pacing_burst = 0;
  EXPECT_THAT(std::string(o.Validate().message()), HasSubstr("pacing_burst"));
  o = {};
  o.io = "xdp";
  EXPECT_THAT(std::string(o.Validate().message()), HasSubstr("io: "));
  o = {};
  o.retransmit_timeout_ms = 50;
  o.max_retransmit_timeout_ms = 10;
  EXPECT_THAT(std::string(o.Validate().message()),
              HasSubstr("retransmit_timeout_ms <= max_retransmit_timeout_ms"));
}

TEST(ClientSettingsTest, SetClientSettingChecksTypeAndRange) {
  CommunicatorOptions o;
  ASSERT_TRUE(SetClientSetting(&o, "max_pending_chunks", uint64_t{16}).ok());
  EXPECT_EQ(o.max_pending_chunks, 16u);
  ASSERT_TRUE(SetClientSetting(&o, "pacing_gain", uint64_t{2}).ok());  // an integer as a number
  EXPECT_EQ(o.pacing_gain, 2.0);
  ASSERT_TRUE(SetClientSetting(&o, "io", std::string("mmsg")).ok());
  EXPECT_EQ(o.io, "mmsg");
  const absl::Status type = SetClientSetting(&o, "chunk_size", std::string("big"));
  EXPECT_TRUE(absl::IsInvalidArgument(type));
  EXPECT_THAT(std::string(type.message()),
              HasSubstr("chunk_size: expected a non-negative integer"));
  const absl::Status range = SetClientSetting(&o, "chunk_size", uint64_t{4094});
  EXPECT_THAT(std::string(range.message()), HasSubstr("chunk_size: value 4094 must be a multiple"));
  EXPECT_EQ(o.chunk_size, CommunicatorOptions{}.chunk_size);  // refused values are not stored
  EXPECT_TRUE(absl::IsNotFound(SetClientSetting(&o, "rank", uint64_t{1})));
}

TEST(ClientSettingsTest, FlagsFollowFromTheTable) {
  CLI::App app;
  settings::FlagSet flags;
  CommunicatorOptions o;
  flags.Add(app, ClientSettings(), o);
  std::vector<std::string> args = {"false", "--competitive", "4096", "--chunk-size",
                                   "16",    "--window"};  // CLI11 parses a reversed vector
  app.parse(args);
  ASSERT_TRUE(flags.Apply(ClientSettings(), &o).ok());
  EXPECT_EQ(o.max_pending_chunks, 16u);
  EXPECT_EQ(o.chunk_size, 4096u);
  EXPECT_FALSE(o.competitive);
  EXPECT_EQ(o.switch_timeout_ms, CommunicatorOptions{}.switch_timeout_ms);  // not given

  CLI::App app2;
  settings::FlagSet flags2;
  flags2.Add(app2, ClientSettings(), o);
  std::vector<std::string> bad = {"4094", "--chunk-size"};
  app2.parse(bad);
  const absl::Status s = flags2.Apply(ClientSettings(), &o);
  EXPECT_THAT(std::string(s.message()), HasSubstr("--chunk-size 4094"));
}

}  // namespace
}  // namespace inca::client
