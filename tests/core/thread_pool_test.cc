#include "core/thread_pool.h"

#include <atomic>
#include <numeric>
#include <set>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace gravac {
namespace {

// Every index in [0, n) is visited exactly once, chunks are contiguous and in lane order.
void CheckCoverage(ThreadPool& pool, int64_t n, int64_t grain) {
  std::vector<std::atomic<int>> hits(n);
  std::vector<std::pair<int64_t, int64_t>> bounds(pool.size(), {-1, -1});
  pool.ParallelFor(n, grain, [&](int lane, int64_t begin, int64_t end) {
    bounds[lane] = {begin, end};
    for (int64_t i = begin; i < end; ++i) hits[i].fetch_add(1);
  });
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "index " << i;
  int chunks = pool.NumChunks(n, grain);
  int64_t expect_begin = 0;
  for (int lane = 0; lane < chunks; ++lane) {
    EXPECT_EQ(bounds[lane].first, expect_begin) << "lane " << lane;
    expect_begin = bounds[lane].second;
  }
  EXPECT_EQ(expect_begin, n);
}

TEST(ThreadPool, CoversEveryIndexOnceForManySizes) {
  for (int lanes : {1, 2, 3, 8}) {
    ThreadPool pool(lanes);
    EXPECT_EQ(pool.size(), lanes);
    for (int64_t n : {1, 2, 3, 7, 100, 1001, 100003}) {
      for (int64_t grain : {1, 16, 1000}) CheckCoverage(pool, n, grain);
    }
  }
}

TEST(ThreadPool, ZeroElementsRunsNothing) {
  ThreadPool pool(2);
  bool ran = false;
  pool.ParallelFor(0, 1, [&](int, int64_t, int64_t) { ran = true; });
  EXPECT_FALSE(ran);
  EXPECT_EQ(pool.NumChunks(0, 1), 0);
}

TEST(ThreadPool, SmallLoopsStayOnTheCaller) {
  ThreadPool pool(4);
  std::thread::id caller = std::this_thread::get_id();
  std::set<std::thread::id> seen;
  pool.ParallelFor(10, 1000, [&](int lane, int64_t, int64_t) {
    EXPECT_EQ(lane, 0);
    seen.insert(std::this_thread::get_id());
  });
  EXPECT_EQ(seen, std::set<std::thread::id>{caller});
}

TEST(ThreadPool, UsesWorkerThreadsForLargeLoops) {
  ThreadPool pool(2);
  std::atomic<int> lanes_seen{0};
  pool.ParallelFor(1 << 20, 1, [&](int lane, int64_t, int64_t) { lanes_seen |= 1 << lane; });
  EXPECT_EQ(lanes_seen.load(), 3);
}

TEST(ThreadPool, NestedCallsRunInline) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  pool.ParallelFor(4, 1, [&](int, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      pool.ParallelFor(100, 1, [&](int, int64_t b, int64_t e) { total += e - b; });
    }
  });
  EXPECT_EQ(total.load(), 400);
}

TEST(ThreadPool, ConcurrentCallersAreSerialisedAndCorrect) {
  ThreadPool pool(2);
  std::vector<std::thread> callers;
  std::vector<int64_t> sums(4, 0);
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&, c] {
      for (int rep = 0; rep < 50; ++rep) {
        std::vector<int64_t> part(pool.size(), 0);
        pool.ParallelFor(10000, 1, [&](int lane, int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) part[lane] += i;
        });
        sums[c] += std::accumulate(part.begin(), part.end(), int64_t{0});
      }
    });
  }
  for (auto& t : callers) t.join();
  for (int64_t s : sums) EXPECT_EQ(s, 50 * (int64_t{9999} * 10000 / 2));
}

}  // namespace
}  // namespace gravac
