#include "inca/util/size.h"

#include <gtest/gtest.h>

namespace inca::util {
namespace {

TEST(ParseSizeTest, TakesPlainNumbersAndBinaryMultiples) {
  EXPECT_EQ(*ParseSize("1024"), 1024u);
  EXPECT_EQ(*ParseSize("64K"), 65536u);
  EXPECT_EQ(*ParseSize("8m"), uint64_t{8} << 20);
  EXPECT_EQ(*ParseSize("1G"), uint64_t{1} << 30);
}

TEST(ParseSizeTest, RefusesWhatIsNotASizeInOneLine) {
  for (const char* s : {"", "K", "12Q", "-4K", "1.5M", "99999999999999999999", "17179869184G"}) {
    auto r = ParseSize(s);
    ASSERT_FALSE(r.ok()) << s;
    EXPECT_NE(r.status().message().find("is not like 1024"), std::string::npos) << s;
  }
}

}  // namespace
}  // namespace inca::util
