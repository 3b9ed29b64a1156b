// A setting declared once in a fixture table turns up as a YAML key (with
// range errors naming key and line, and its deprecated alias), as a flag,
// in ValidateAll and in the generated reference.
#include "util/settings.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <CLI/CLI.hpp>

namespace inca::settings {
namespace {

using ::testing::HasSubstr;

struct Toy {
  uint32_t widgets = 4;
  double ratio = 0.5;
  bool fast = false;
  std::string mode = "a";
  std::vector<int> list;
};

Table<Toy> ToyTable() {
  Table<Toy> t;
  t.push_back(
      {{.key = "widgets",
        .type = Type::kUint,
        .lo = 1,
        .hi = 8,
        .unit = "widgets",
        .runtime = true,
        .doc = "how many widgets",
        .aliases = {"gadgets"}},
       [](const Toy& c) { return Value(uint64_t{c.widgets}); },
       [](Toy* c, const Value& v) { c->widgets = static_cast<uint32_t>(std::get<uint64_t>(v)); }});
  t.push_back(
      {{.key = "ratio", .type = Type::kNumber, .lo = 0, .hi = 1, .lo_open = true, .doc = "r"},
       [](const Toy& c) { return Value(c.ratio); },
       [](Toy* c, const Value& v) { c->ratio = std::get<double>(v); }});
  t.push_back({{.key = "fast", .type = Type::kBool, .doc = "go fast", .bare_flag = true},
               [](const Toy& c) { return Value(c.fast); },
               [](Toy* c, const Value& v) { c->fast = std::get<bool>(v); }});
  t.push_back({{.key = "mode", .type = Type::kChoice, .choices = {"a", "b"}, .doc = "m"},
               [](const Toy& c) { return Value(c.mode); },
               [](Toy* c, const Value& v) { c->mode = std::get<std::string>(v); }});
  return t;
}

absl::Status Yaml(const std::string& text, Toy* toy,
                  std::vector<std::string>* deprecated = nullptr) {
  std::map<std::string, YamlHandler> lists;
  lists["list"] = [toy](const YAML::Node& n, const std::string&) {
    for (const auto& x : n) toy->list.push_back(x.as<int>());
    return absl::OkStatus();
  };
  return ApplyYaml(ToyTable(), YAML::Load(text), "toy.yaml", toy, lists, deprecated);
}

TEST(SettingsTest, YamlKeysAreTheTableWithRangeErrorsNamingKeyAndLine) {
  Toy toy;
  ASSERT_TRUE(Yaml("widgets: 6\nratio: 1\nfast: yes\nmode: b\nlist: [1, 2]\n", &toy).ok());
  EXPECT_EQ(toy.widgets, 6u);
  EXPECT_EQ(toy.ratio, 1.0);
  EXPECT_TRUE(toy.fast);
  EXPECT_EQ(toy.mode, "b");
  EXPECT_EQ(toy.list, (std::vector<int>{1, 2}));

  auto error = [](const std::string& text) {
    Toy t;
    return std::string(Yaml(text, &t).message());
  };
  EXPECT_EQ(error("mode: a\nwidgets: 9\n"),
            "toy.yaml: key 'widgets' (line 2): value 9 out of range [1, 8]");
  EXPECT_THAT(error("ratio: 0\n"), HasSubstr("value 0 out of range (0, 1]"));
  EXPECT_THAT(error("widgets: many\n"), HasSubstr("expected a non-negative integer, got 'many'"));
  EXPECT_THAT(error("widgets: [1]\n"), HasSubstr("expected a non-negative integer, got a list"));
  EXPECT_THAT(error("mode: c\n"), HasSubstr("unknown value 'c'; use a or b"));
  EXPECT_THAT(error("fast: maybe\n"), HasSubstr("expected true or false"));
  EXPECT_THAT(error("colour: red\n"),
              HasSubstr("unknown key 'colour' in the top level (line 1); known keys: fast, list, "
                        "mode, ratio, widgets"));
  EXPECT_THAT(error("mode: a\nmode: b\n"), HasSubstr("duplicate key 'mode'"));
  EXPECT_THAT(error("- 1\n"), HasSubstr("expected a mapping"));
}

TEST(SettingsTest, ADeprecatedAliasStillWorksAndIsReported) {
  Toy toy;
  std::vector<std::string> deprecated;
  ASSERT_TRUE(Yaml("gadgets: 3\n", &toy, &deprecated).ok());
  EXPECT_EQ(toy.widgets, 3u);
  EXPECT_EQ(deprecated, (std::vector<std::string>{"gadgets -> widgets"}));
  Toy both;
  EXPECT_THAT(std::string(Yaml("widgets: 2\ngadgets: 3\n", &both).message()),
              HasSubstr("'widgets' and 'gadgets' are the same setting; give one"));
}

TEST(SettingsTest, FlagsComeFromTheTableAndWinOverTheFile) {
  const Table<Toy> table = ToyTable();
  Toy toy;
  CLI::App app;
  FlagSet flags;
  flags.Add(app, table, toy);
  const std::string help = app.help();
  EXPECT_THAT(help, HasSubstr("--widgets"));
  EXPECT_THAT(help, HasSubstr("how many widgets (widgets); [1, 8]"));
  ASSERT_TRUE(Yaml("widgets: 2\nmode: b\n", &toy).ok());         // the file first
  std::vector<std::string> args = {"7", "--widgets", "--fast"};  // CLI11: argv reversed
  app.parse(args);
  ASSERT_TRUE(flags.Apply(table, &toy).ok());
  EXPECT_EQ(toy.widgets, 7u);  // given: wins
  EXPECT_TRUE(toy.fast);
  EXPECT_EQ(toy.mode, "b");  // not given: the file's

  CLI::App app2;
  FlagSet flags2;
  flags2.Add(app2, table, toy);
  std::vector<std::string> bad = {"0", "--widgets"};
  app2.parse(bad);
  EXPECT_EQ(std::string(flags2.Apply(table, &toy).message()),
            "--widgets 0: value 0 out of range [1, 8]");
  EXPECT_EQ(toy.widgets, 7u);  // refused: nothing changed
}

TEST(SettingsTest, AVariableDeclaredWithTheSettingSetsItUnlessItsFlagIsGiven) {
  Table<Toy> table = ToyTable();
  table[0].spec.env = "TOY_WIDGETS";
  table[3].spec.env = "TOY_MODE";
  std::map<std::string, std::string> env = {{"TOY_WIDGETS", "3"}, {"TOY_MODE", "b"}};
  const auto lookup = [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  Toy toy;
  ASSERT_TRUE(ApplyEnvironment(table, &toy, lookup).ok());
  EXPECT_EQ(toy.widgets, 3u);
  EXPECT_EQ(toy.mode, "b");
  EXPECT_EQ(toy.ratio, 0.5);  // no variable declared: untouched

  // Empty is not given; a bad value names the variable and changes nothing.
  env = {{"TOY_WIDGETS", ""}, {"TOY_MODE", "z"}};
  Toy other;
  EXPECT_EQ(std::string(ApplyEnvironment(table, &other, lookup).message()),
            "TOY_MODE='z': unknown value 'z'; use a or b");
  EXPECT_EQ(other.widgets, 4u);
  EXPECT_EQ(other.mode, "a");
  env = {{"TOY_WIDGETS", "9"}};
  EXPECT_EQ(std::string(ApplyEnvironment(table, &other, lookup).message()),
            "TOY_WIDGETS='9': value 9 out of range [1, 8]");

  // The reference, --help and the JSON form name it.
  EXPECT_THAT(Markdown(table, Toy{}), HasSubstr("| `mode` | `--mode`, env `TOY_MODE` | choice"));
  EXPECT_THAT(Json(table), HasSubstr("\"key\":\"mode\",\"type\":\"choice\""));
  EXPECT_THAT(Json(table), HasSubstr("\"env\":\"TOY_MODE\""));
  CLI::App app;
  FlagSet flags;
  flags.Add(app, table, Toy{});
  EXPECT_THAT(app.help(), HasSubstr("; env TOY_MODE"));
}

TEST(SettingsTest, FlagSetApplyReadsTheVariableOfAFlagNotGiven) {
  Table<Toy> table = ToyTable();
  table[3].spec.env = "INCA_SETTINGS_TEST_MODE";  // FlagSet reads the real environment
  ::setenv("INCA_SETTINGS_TEST_MODE", "b", 1);
  Toy toy;
  {
    CLI::App app;
    FlagSet flags;
    flags.Add(app, table, toy);
    std::vector<std::string> none;
    app.parse(none);
    ASSERT_TRUE(flags.Apply(table, &toy).ok());
    EXPECT_EQ(toy.mode, "b");
  }
  {
    CLI::App app;
    FlagSet flags;
    flags.Add(app, table, toy);
    std::vector<std::string> args = {"a", "--mode"};  // the flag wins
    app.parse(args);
    ASSERT_TRUE(flags.Apply(table, &toy).ok());
    EXPECT_EQ(toy.mode, "a");
  }
  ::setenv("INCA_SETTINGS_TEST_MODE", "c", 1);
  {
    CLI::App app;
    FlagSet flags;
    flags.Add(app, table, toy);
    std::vector<std::string> none;
    app.parse(none);
    EXPECT_EQ(std::string(flags.Apply(table, &toy).message()),
              "INCA_SETTINGS_TEST_MODE='c': unknown value 'c'; use a or b");
  }
  ::unsetenv("INCA_SETTINGS_TEST_MODE");
}

TEST(SettingsTest, ValidateAllChecksValuesSetInCode) {
  Toy toy;
  EXPECT_TRUE(ValidateAll(ToyTable(), toy).ok());
  toy.widgets = 0;
  EXPECT_EQ(std::string(ValidateAll(ToyTable(), toy).message()),
            "widgets: value 0 out of range [1, 8]");
  toy = Toy{};
  toy.mode = "z";
  EXPECT_THAT(std::string(ValidateAll(ToyTable(), toy).message()),
              HasSubstr("mode: unknown value"));
}

TEST(SettingsTest, TheReferenceHasARowPerSetting) {
  const std::string md = Markdown(ToyTable(), Toy{});
  EXPECT_THAT(md, HasSubstr("| `widgets` | `--widgets` | integer | [1, 8] | widgets | `4` | yes | "
                            "how many widgets. Deprecated YAML name: `gadgets`. |\n"));
  EXPECT_THAT(md, HasSubstr("| `mode` | `--mode` | choice | a or b |  | `a` |  | m |\n"));
  EXPECT_THAT(md, HasSubstr("| `ratio` | `--ratio` | number | (0, 1] |  | `0.5` |  | r |\n"));
}

TEST(SettingsTest, TextParsesByType) {
  Spec u{.key = "u", .type = Type::kUint, .lo = 0, .hi = 100, .multiple_of = 4};
  EXPECT_EQ(std::get<uint64_t>(*Parse(u, "8")), 8u);
  EXPECT_THAT(std::string(Parse(u, "6").status().message()), HasSubstr("multiple of 4"));
  EXPECT_THAT(std::string(Parse(u, "-4").status().message()), HasSubstr("must not be negative"));
  EXPECT_FALSE(Parse(u, "1.5").ok());
  EXPECT_FALSE(Parse(u, "").ok());
  Spec d{.key = "d", .type = Type::kNumber, .lo = -1, .hi = 1};
  EXPECT_EQ(std::get<double>(*Parse(d, "-0.25")), -0.25);
  EXPECT_FALSE(Parse(d, "nan").ok());
  EXPECT_FALSE(Parse(d, "inf").ok());
  Spec b{.key = "b", .type = Type::kBool};
  for (const char* t : {"true", "Yes", "on", "1"}) EXPECT_TRUE(std::get<bool>(*Parse(b, t))) << t;
  for (const char* t : {"false", "NO", "off", "0"}) EXPECT_FALSE(std::get<bool>(*Parse(b, t))) << t;
  Spec s{.key = "s", .check = [](const Value& v) {
           return std::get<std::string>(v).empty() ? absl::InvalidArgumentError("empty")
                                                   : absl::OkStatus();
         }};
  EXPECT_EQ(std::string(Parse(s, "").status().message()), "empty");
  EXPECT_EQ(Format(Value(2.5)), "2.5");
  EXPECT_EQ(Format(Value(3.0)), "3");
  EXPECT_EQ(Format(Value(uint64_t{18446744073709551615u})), "18446744073709551615");
}

}  // namespace
}  // namespace inca::settings
