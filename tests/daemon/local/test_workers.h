// Helpers for tests that run workers (C API contexts) as threads against an in-process
// WorkerServer: a temporary socket directory, configurations and a runner.
//
// Thread-safety: TempDir is owned by one test; RunWorkers joins its threads before returning.
#ifndef GRAVAC_TESTS_DAEMON_LOCAL_TEST_WORKERS_H_
#define GRAVAC_TESTS_DAEMON_LOCAL_TEST_WORKERS_H_

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gravac/gravac.h"

namespace gravac::daemon::testing {

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/gravac_local_XXXXXX";
    char* d = ::mkdtemp(tmpl);
    path_ = d != nullptr ? d : "/tmp";
    socket_ = path_ + "/gravacd.sock";
  }
  ~TempDir() {
    std::string cmd = "rm -rf '" + path_ + "'";
    int unused = std::system(cmd.c_str());
    (void)unused;
  }
  const std::string& path() const { return path_; }
  // Stable storage: gravac_config keeps a pointer to it.
  const std::string& socket() const { return socket_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
  std::string socket_;
};

inline gravac_config MakeConfig(const std::string& socket, int rank, int size, int local_rank,
                                int local_size, int64_t staging_bytes = 0) {
  gravac_config c{};
  c.rank = rank;
  c.size = size;
  c.local_rank = local_rank;
  c.local_size = local_size;
  c.daemon_socket = socket.c_str();
  c.connect_timeout_s = 5;
  c.staging_bytes = staging_bytes;
  return c;
}

// Runs `fn(local_rank, ctx)` on `n` threads, each with a context of rank first_rank + local_rank
// of `size`; fn returns nothing and uses gtest assertions. Shuts every context down
// (unless `shutdown` is false: then fn does).
inline void RunWorkers(const std::string& socket, int n, int first_rank, int size,
                       const std::function<void(int, gravac_context*)>& fn,
                       int64_t staging_bytes = 0, bool shutdown = true) {
  std::vector<std::thread> threads;
  for (int lr = 0; lr < n; ++lr) {
    threads.emplace_back([&, lr] {
      gravac_config c = MakeConfig(socket, first_rank + lr, size, lr, n, staging_bytes);
      gravac_context* ctx = nullptr;
      char error[512] = {0};
      gravac_status s = gravac_init_with_config(&c, &ctx, error, sizeof(error));
      if (s != GRAVAC_OK) {
        ADD_FAILURE() << "init of local rank " << lr << ": " << error;
        return;
      }
      fn(lr, ctx);
      if (shutdown) {
        EXPECT_EQ(gravac_shutdown(ctx), GRAVAC_OK);
      }
    });
  }
  for (auto& t : threads) t.join();
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace gravac::daemon::testing

#endif  // GRAVAC_TESTS_DAEMON_LOCAL_TEST_WORKERS_H_
