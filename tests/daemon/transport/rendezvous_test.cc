#include "daemon/transport/rendezvous.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::transport {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::Not;

// A fresh directory under the test's temporary directory, removed afterwards.
class RendezvousTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir_ = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/gravac-rdv-", getpid(), "-",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

std::string BlobFor(int rank) {
  std::string blob = absl::StrCat("addr-of-", rank);
  blob.push_back('\0');  // binary-safe
  blob.push_back(static_cast<char>(0xff));
  return blob;
}

TEST_F(RendezvousTest, ThreadsExchangeTheirBlobs) {
  constexpr int kP = 4;
  std::vector<std::string> expected;
  for (int r = 0; r < kP; ++r) expected.push_back(BlobFor(r));
  std::vector<absl::StatusOr<std::vector<std::string>>> results(kP);
  std::vector<std::thread> threads;
  for (int r = 0; r < kP; ++r) {
    threads.emplace_back([&, r] {
      FileRendezvous rendezvous(dir_, r, kP, absl::Seconds(10));
      results[r] = rendezvous.Exchange(BlobFor(r));
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kP; ++r) {
    ASSERT_THAT(results[r], IsOk()) << "rank " << r;
    EXPECT_THAT(*results[r], ElementsAreArray(expected));
  }
}

TEST_F(RendezvousTest, ForkedProcessesExchangeTheirBlobs) {
  constexpr int kP = 3;
  std::vector<pid_t> children;
  for (int r = 1; r < kP; ++r) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      FileRendezvous rendezvous(dir_, r, kP, absl::Seconds(10));
      absl::StatusOr<std::vector<std::string>> all = rendezvous.Exchange(BlobFor(r));
      _exit(all.ok() && all->size() == kP && (*all)[0] == BlobFor(0) ? 0 : 1);
    }
    children.push_back(pid);
  }
  FileRendezvous rendezvous(dir_, 0, kP, absl::Seconds(10));
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> all, rendezvous.Exchange(BlobFor(0)));
  for (int r = 0; r < kP; ++r) EXPECT_EQ(all[r], BlobFor(r));
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
}

TEST_F(RendezvousTest, TimeoutNamesTheMissingRanks) {
  FileRendezvous rank0(dir_, 0, 4, absl::Milliseconds(50));
  FileRendezvous rank2(dir_, 2, 4, absl::Milliseconds(50));
  ASSERT_THAT(rank2.Publish(BlobFor(2)), IsOk());
  const absl::Time start = absl::Now();
  EXPECT_THAT(rank0.Exchange(BlobFor(0)),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       AllOf(HasSubstr("rank 0: ranks 1, 3 of 4 did not publish"), HasSubstr(dir_),
                             Not(HasSubstr("ranks 0")))));
  const absl::Duration elapsed = absl::Now() - start;
  EXPECT_GE(elapsed, absl::Milliseconds(50));
  EXPECT_LT(elapsed, absl::Seconds(2));
}

TEST_F(RendezvousTest, SingleMissingRankIsNamed) {
  FileRendezvous rank1(dir_, 1, 2, absl::Milliseconds(10));
  EXPECT_THAT(rank1.Exchange("x"), StatusIs(absl::StatusCode::kDeadlineExceeded,
                                            HasSubstr("rank 1: rank 0 of 2 did not publish")));
}

TEST_F(RendezvousTest, PublishIsAtomicAndOverwrites) {
  FileRendezvous rendezvous(dir_, 0, 1, absl::Seconds(1));
  ASSERT_THAT(rendezvous.Publish("first"), IsOk());
  ASSERT_THAT(rendezvous.Publish("second"), IsOk());
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> all, rendezvous.WaitForAll());
  EXPECT_THAT(all, ElementsAreArray({std::string("second")}));
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
    EXPECT_EQ(entry.path().extension(), ".addr") << entry.path();  // no temporary left behind
    ++files;
  }
  EXPECT_EQ(files, 1);
}

TEST_F(RendezvousTest, RankOutsideTheWorldIsRejected) {
  FileRendezvous rendezvous(dir_, 3, 2, absl::Seconds(1));
  EXPECT_THAT(rendezvous.Publish("x"), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(RendezvousTest, UnwritableDirectoryIsAnError) {
  FileRendezvous rendezvous("/proc/gravac-no-such-dir", 0, 1, absl::Seconds(1));
  EXPECT_THAT(rendezvous.Publish("x"), StatusIs(absl::StatusCode::kUnavailable));
}

}  // namespace
}  // namespace gravac::transport
