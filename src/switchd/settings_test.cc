// inca-switchd's settings table: the generated reference is current, and
// every declared setting round-trips through its text form.
#include "switchd/settings.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

#include <fstream>
#include <set>
#include <sstream>

namespace inca::switchd {
namespace {

TEST(SwitchdSettingsTest, DocsSettingsMdIsTheGeneratedReference) {
  std::ifstream in(INCA_SETTINGS_DOC);
  ASSERT_TRUE(in) << INCA_SETTINGS_DOC;
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), SettingsMarkdown())
      << "docs/settings.md is stale: build/release/bin/inca-switchd --settings-markdown > "
         "docs/settings.md";
}

TEST(SwitchdSettingsTest, DocsMonitoringMdHasTheGeneratedCounterRows) {
  std::ifstream in(INCA_MONITORING_DOC);
  ASSERT_TRUE(in) << INCA_MONITORING_DOC;
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find(CountersMarkdown()), std::string::npos)
      << "docs/monitoring.md's counter rows are stale: replace the block between the "
         "counters markers with build/release/bin/inca-switchd --counters-markdown";
}

TEST(SwitchdSettingsTest, EveryDefaultIsValidAndRoundTripsThroughText) {
  const SwitchdConfig defaults;
  ASSERT_TRUE(defaults.Validate().ok()) << defaults.Validate();
  std::set<std::string> keys, flags;
  for (const auto& s : SwitchdSettings()) {
    EXPECT_TRUE(keys.insert(s.spec.key).second) << s.spec.key << " declared twice";
    EXPECT_TRUE(flags.insert(settings::FlagName(s.spec)).second) << settings::FlagName(s.spec);
    EXPECT_FALSE(s.spec.doc.empty()) << s.spec.key;
    const std::string text = settings::Format(s.get(defaults));
    auto v = settings::Parse(s.spec, text);
    ASSERT_TRUE(v.ok()) << s.spec.key << " = " << text << ": " << v.status();
    SwitchdConfig c;
    s.set(&c, *v);
    EXPECT_EQ(settings::Format(s.get(c)), text) << s.spec.key;
  }
  for (const auto& [key, unused] : StructuredKeys()) {
    EXPECT_TRUE(keys.insert(key).second) << key << " is both a setting and a list";
  }
}

TEST(SwitchdSettingsTest, AFileKeyAndItsFlagReachTheSameField) {
  SwitchdConfig from_yaml;
  ASSERT_TRUE(
      ApplySwitchdConfigYaml("olaf_delta_t_ms: 250\nmax_payload_bytes: 4096\n", "t", &from_yaml)
          .ok());
  EXPECT_EQ(from_yaml.olaf.delta_t_ms, 250);
  EXPECT_EQ(from_yaml.cais.max_payload_bytes, 4096u);  // the deprecated name of chunk_size
  SwitchdConfig from_flags;
  CLI::App app;
  settings::FlagSet fs;
  fs.Add(app, SwitchdSettings(), from_flags);
  std::vector<std::string> args = {"4096", "--chunk-size", "250", "--delta-t-ms"};
  app.parse(args);
  ASSERT_TRUE(fs.Apply(SwitchdSettings(), &from_flags).ok());
  EXPECT_EQ(from_flags.olaf.delta_t_ms, 250);
  EXPECT_EQ(from_flags.cais.max_payload_bytes, 4096u);
}

}  // namespace
}  // namespace inca::switchd
