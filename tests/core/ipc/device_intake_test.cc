// DeviceIntake (core/ipc/device_intake.h): a buffer whose handle opens is mapped; one that cannot
// be opened (a fake opener's foreign handle, or the real CUDA opener where gravacd has no CUDA or
// no device) is staged through host memory, said once per worker in the log; a malformed export
// is an error naming the worker and field, not a fallback.
#include "core/ipc/device_intake.h"

#include <cstdio>
#include <cstring>
#include <string>

#include "core/ipc/cuda_ipc.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gravac::ipc {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// Opens handles whose first byte is not 0xff at distinct fake addresses.
class FakeOpener : public MemHandleOpener {
 public:
  absl::StatusOr<void*> Open(const DeviceBufferExport& e) override {
    if (e.mem_handle[0] == 0xff) return absl::InvalidArgumentError("invalid resource handle");
    next_ += 0x100000;
    return reinterpret_cast<void*>(next_);
  }
  void Close(void*, int) override {}

 private:
  uintptr_t next_ = 0x10000000;
};

DeviceBufferExport Export(uint64_t base, uint8_t handle_byte) {
  DeviceBufferExport e;
  std::memset(e.mem_handle, handle_byte, sizeof(e.mem_handle));
  e.base_address = base;
  e.allocation_bytes = 1 << 20;
  e.bytes = 4096;
  e.buffer_id = handle_byte;
  e.device = 0;
  return e;
}

// A logger writing to a temporary file, and what it wrote.
class LogCapture {
 public:
  LogCapture() : file_(std::tmpfile()), log_("gravacd[test]", LogLevel::kInfo, file_) {}
  ~LogCapture() { std::fclose(file_); }
  const Logger* log() const { return &log_; }
  std::string Text() {
    std::fflush(file_);
    std::rewind(file_);
    std::string text;
    char buf[512];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), file_)) > 0) text.append(buf, n);
    return text;
  }

 private:
  std::FILE* file_;
  Logger log_;
};

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(DeviceIntakeTest, AHandleThatCannotBeOpenedIsStagedAndSaidOncePerWorker) {
  FakeOpener opener;
  LogCapture capture;
  DeviceIntake intake(&opener, capture.log());
  ASSERT_OK_AND_ASSIGN(DeviceIntake::Taken mapped, intake.Take(1, Export(0x7000000, 1)));
  EXPECT_FALSE(mapped.staged);
  EXPECT_NE(mapped.data, nullptr);
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(DeviceIntake::Taken foreign,
                         intake.Take(1, Export(0x9000000 + i * 0x200000, 0xff)));
    EXPECT_TRUE(foreign.staged);
    EXPECT_EQ(foreign.data, nullptr);
    EXPECT_THAT(foreign.reason, AllOf(HasSubstr("worker 1"), HasSubstr("field device_handle"),
                                      HasSubstr("invalid resource handle")));
  }
  ASSERT_OK_AND_ASSIGN(DeviceIntake::Taken other, intake.Take(2, Export(0x9000000, 0xff)));
  EXPECT_TRUE(other.staged);
  std::string log = capture.Text();
  EXPECT_EQ(Count(log, "staged through host memory"), 2) << log;
  EXPECT_EQ(Count(log, "worker 1,"), 1) << log;
  EXPECT_EQ(Count(log, "worker 2,"), 1) << log;
  // The mapping that worked is still used; a reconnected worker is told again.
  ASSERT_OK_AND_ASSIGN(DeviceIntake::Taken again, intake.Take(1, Export(0x7000000, 1)));
  EXPECT_EQ(again.data, mapped.data);
  intake.DropWorker(1);
  EXPECT_EQ(intake.cache().size(), 0u);
  ASSERT_THAT(intake.Take(1, Export(0x9000000, 0xff)).status(), IsOk());
  EXPECT_EQ(Count(capture.Text(), "worker 1,"), 2);
}

TEST(DeviceIntakeTest, AMalformedExportIsAnErrorNotAFallback) {
  FakeOpener opener;
  LogCapture capture;
  DeviceIntake intake(&opener, capture.log());
  DeviceBufferExport overrun = Export(0x7000000, 1);
  overrun.offset = overrun.allocation_bytes;
  EXPECT_THAT(intake.Take(4, overrun),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("worker 4"), HasSubstr("field bytes"))));
  EXPECT_EQ(capture.Text(), "");
}

// With the real CUDA opener: where gravacd cannot open handles (no CUDA in the build, no device
// here, or a handle that is not one) the buffer is staged; on a GPU machine a garbage handle is
// refused by the driver and staged as well.
TEST(DeviceIntakeTest, TheCudaOpenerFallsBackToStagingForAForeignHandle) {
  CudaIpcOpener opener;
  LogCapture capture;
  DeviceIntake intake(&opener, capture.log());
  ASSERT_OK_AND_ASSIGN(DeviceIntake::Taken taken, intake.Take(0, Export(0x7f0000000000, 0x5a)));
  EXPECT_TRUE(taken.staged);
  EXPECT_THAT(taken.reason, AllOf(HasSubstr("worker 0"), HasSubstr("field device_handle")));
  EXPECT_THAT(capture.Text(), HasSubstr("staged through host memory"));
}

}  // namespace
}  // namespace gravac::ipc
