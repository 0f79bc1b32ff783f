#include "core/enum_names.h"

#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac {
namespace {

enum class Color { kRed = 3, kGreen = 7, kBlue = 1 };

constexpr EnumName<Color> kColors[] = {
    {Color::kRed, "red"}, {Color::kGreen, "green"}, {Color::kBlue, "blue"}};

TEST(EnumNamesTest, NameOfReadsTheTableWhateverTheValues) {
  static_assert(NameOf(kColors, Color::kGreen) == "green");
  EXPECT_EQ(NameOf(kColors, Color::kBlue), "blue");
  EXPECT_EQ(NameOf(kColors, static_cast<Color>(42)), "unknown");
  EXPECT_EQ(NameOf(kColors, static_cast<Color>(42), "?"), "?");
}

TEST(EnumNamesTest, ValueOfIsTheInverse) {
  for (const auto& [value, name] : kColors) EXPECT_EQ(ValueOf(kColors, name), value);
  EXPECT_EQ(ValueOf(kColors, "Red"), std::nullopt);  // exact names only
  EXPECT_EQ(ValueOf(kColors, ""), std::nullopt);
}

TEST(EnumNamesTest, NameListInTableOrder) { EXPECT_EQ(NameList(kColors), "red, green, blue"); }

TEST(EnumNamesTest, ParseEnumNamesWhatAndTheChoices) {
  EXPECT_THAT(ParseEnum(kColors, "green", "color"), IsOk());
  EXPECT_EQ(*ParseEnum(kColors, "green", "color"), Color::kGreen);
  EXPECT_THAT(ParseEnum(kColors, "mauve", "color"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "color \"mauve\" is not one of: red, green, blue"));
}

}  // namespace
}  // namespace gravac
