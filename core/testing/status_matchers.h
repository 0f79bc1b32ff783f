// GoogleMock matchers for absl::Status and absl::StatusOr<T> (Debian's abseil has none).
// Declared in gravac::testing and named in namespace gravac too, so every test in gravac's
// namespaces writes them unqualified without a using-declaration of its own:
//
//   EXPECT_THAT(status, IsOk());
//   EXPECT_THAT(status_or, StatusIs(absl::StatusCode::kInvalidArgument));
//   EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rank 2")));
//   ASSERT_OK_AND_ASSIGN(auto value, FunctionReturningStatusOr());
#ifndef GRAVAC_CORE_TESTING_STATUS_MATCHERS_H_
#define GRAVAC_CORE_TESTING_STATUS_MATCHERS_H_

#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::testing {
namespace internal {

inline const absl::Status& GetStatus(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& s) {
  return s.status();
}

class StatusIsMatcher {
 public:
  using is_gtest_matcher = void;
  StatusIsMatcher(absl::StatusCode code, ::testing::Matcher<const std::string&> message)
      : code_(code), message_(std::move(message)) {}

  template <typename StatusType>
  bool MatchAndExplain(const StatusType& value, ::testing::MatchResultListener* listener) const {
    const absl::Status& s = GetStatus(value);
    *listener << "whose status is " << s;
    if (s.code() != code_) return false;
    return message_.MatchAndExplain(std::string(s.message()), listener);
  }
  void DescribeTo(std::ostream* os) const {
    *os << "has status code " << absl::StatusCodeToString(code_) << " and message that ";
    message_.DescribeTo(os);
  }
  void DescribeNegationTo(std::ostream* os) const {
    *os << "does not have status code " << absl::StatusCodeToString(code_)
        << " or has a message that ";
    message_.DescribeNegationTo(os);
  }

 private:
  absl::StatusCode code_;
  ::testing::Matcher<const std::string&> message_;
};

class IsOkMatcher {
 public:
  using is_gtest_matcher = void;
  template <typename StatusType>
  bool MatchAndExplain(const StatusType& value, ::testing::MatchResultListener* listener) const {
    const absl::Status& s = GetStatus(value);
    if (!s.ok()) *listener << "whose status is " << s;
    return s.ok();
  }
  void DescribeTo(std::ostream* os) const { *os << "is OK"; }
  void DescribeNegationTo(std::ostream* os) const { *os << "is not OK"; }
};

}  // namespace internal

inline internal::IsOkMatcher IsOk() { return {}; }

inline internal::StatusIsMatcher StatusIs(absl::StatusCode code) {
  return {code, ::testing::A<const std::string&>()};
}
inline internal::StatusIsMatcher StatusIs(absl::StatusCode code,
                                          ::testing::Matcher<const std::string&> message) {
  return {code, std::move(message)};
}

}  // namespace gravac::testing

namespace gravac {
using ::gravac::testing::IsOk;
using ::gravac::testing::StatusIs;
}  // namespace gravac

#define GRAVAC_TESTING_CONCAT_INNER_(a, b) a##b
#define GRAVAC_TESTING_CONCAT_(a, b) GRAVAC_TESTING_CONCAT_INNER_(a, b)
#define GRAVAC_ASSERT_OK_AND_ASSIGN_IMPL_(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                                      \
  ASSERT_TRUE(tmp.ok()) << tmp.status();                   \
  lhs = std::move(tmp).value()
#define ASSERT_OK_AND_ASSIGN(lhs, rexpr) \
  GRAVAC_ASSERT_OK_AND_ASSIGN_IMPL_(GRAVAC_TESTING_CONCAT_(gravac_assert_or_, __LINE__), lhs, rexpr)

#endif  // GRAVAC_CORE_TESTING_STATUS_MATCHERS_H_
