// gravac-mpi-allreduce-peer: the OpenMPI peer of gravac-collectives-bench (BENCHMARKS.md, ratio
// 1). Every rank runs MPI_Allreduce(MPI_FLOAT, MPI_SUM) over the same size sweep as the bench,
// with the same small-integer inputs (every sum exact in any order): --warmup untimed and --iters
// timed calls per size, each after an MPI_Barrier and timed alone; every element of the last
// result is checked. Rank 0 prints one line per size with the slowest rank's median time and the
// wrong count summed over ranks:
//
//   mpi <bytes> <count> <time_us> <wrong>
//
// and exits non-zero when any element was wrong. It knows nothing of namespaces: the driver
// (bench/collectives_driver.py) starts it with mpirun so that each rank runs in its own node of
// an emulated cluster, over the tcp BTL on that node's interface.
//
// Single-threaded; blocks in MPI calls (no timeout of its own: the driver bounds the run).
// The C API only: the C++ bindings are deprecated and warn under -Wextra.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Options {
  int64_t min_bytes = 1 << 20;
  int64_t max_bytes = int64_t{256} << 20;
  int64_t step_factor = 2;
  int iters = 5;
  int warmup = 1;
};

// Accepts --name=value or --name value for the integer flags above; false on anything else.
bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    const size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg.resize(eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return false;
    }
    char* end = nullptr;
    const long long v = std::strtoll(value.c_str(), &end, 10);
    if (end == value.c_str() || *end != '\0') return false;
    if (arg == "--min_bytes") {
      o->min_bytes = v;
    } else if (arg == "--max_bytes") {
      o->max_bytes = v;
    } else if (arg == "--step_factor") {
      o->step_factor = v;
    } else if (arg == "--iters") {
      o->iters = static_cast<int>(v);
    } else if (arg == "--warmup") {
      o->warmup = static_cast<int>(v);
    } else {
      return false;
    }
  }
  return o->min_bytes >= 4 && o->max_bytes >= o->min_bytes && o->step_factor >= 2 &&
         o->iters >= 1 && o->warmup >= 0;
}

// The bench's InputValue: small integers in [-5, 5].
float InputValue(int rank, size_t i) {
  return static_cast<float>(static_cast<int>((i * 7 + static_cast<size_t>(rank) * 3) % 11) - 5);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int Run(int argc, char** argv) {
  int rank = 0, p = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  Options o;
  if (!ParseArgs(argc, argv, &o)) {
    if (rank == 0) {
      std::fprintf(stderr,
                   "usage: gravac-mpi-allreduce-peer [--min_bytes N] [--max_bytes N] "
                   "[--step_factor N] [--iters N] [--warmup N]\n");
    }
    return 2;
  }
  if (rank == 0) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int length = 0;
    MPI_Get_library_version(version, &length);
    const char* newline = std::strchr(version, '\n');
    std::printf("# mpi np %d library %.*s\n", p,
                static_cast<int>(newline != nullptr ? newline - version : length), version);
  }
  int64_t total_wrong = 0;
  for (int64_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= o.step_factor) {
    const size_t count = std::max<size_t>(1, static_cast<size_t>(bytes) / sizeof(float));
    if (count > static_cast<size_t>(INT32_MAX)) {
      if (rank == 0) std::fprintf(stderr, "mpi peer: %zu elements exceed an int count\n", count);
      return 2;
    }
    std::vector<float> in(count), out(count);
    for (size_t i = 0; i < count; ++i) in[i] = InputValue(rank, i);
    std::vector<double> times_us;
    for (int it = 0; it < o.warmup + o.iters; ++it) {
      std::fill(out.begin(), out.end(), -1000.0f);  // a call that writes nothing is caught
      MPI_Barrier(MPI_COMM_WORLD);
      const auto start = std::chrono::steady_clock::now();
      const int rc = MPI_Allreduce(in.data(), out.data(), static_cast<int>(count), MPI_FLOAT,
                                   MPI_SUM, MPI_COMM_WORLD);
      const double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
              .count();
      if (rc != MPI_SUCCESS) {
        std::fprintf(stderr, "mpi peer: rank %d: MPI_Allreduce of %zu floats failed (%d)\n", rank,
                     count, rc);
        return 1;
      }
      if (it >= o.warmup) times_us.push_back(us);
    }
    float expected[11];  // the input depends on i only through i % 11
    for (size_t j = 0; j < 11; ++j) {
      float sum = 0;
      for (int r = 0; r < p; ++r) sum += InputValue(r, j);
      expected[j] = sum;
    }
    long long wrong = 0;
    for (size_t i = 0; i < count; ++i) wrong += out[i] != expected[i % 11];
    double median = Median(times_us), slowest = 0;
    long long wrong_sum = 0;
    MPI_Reduce(&median, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&wrong, &wrong_sum, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      std::printf("mpi %lld %zu %.3f %lld\n", static_cast<long long>(count * sizeof(float)), count,
                  slowest, wrong_sum);
      std::fflush(stdout);
    }
    total_wrong += wrong_sum;
  }
  if (rank == 0 && total_wrong > 0) {
    std::fprintf(stderr, "mpi peer: %lld wrong elements\n", static_cast<long long>(total_wrong));
  }
  return total_wrong > 0 ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int code = Run(argc, argv);
  // Rank 0 alone knows the wrong count; every rank leaves with its verdict.
  MPI_Bcast(&code, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return code;
}
