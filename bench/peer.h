// Peer: runs the torch.topk peer (bench/torch_topk.py) as a child process in the same run as the
// compressor benchmark and reads its results, which it prints as JSON lines on stdout:
//
//   {"kind": "env", "torch_version": "1.13.0", "threads": 2, "n": 67108864}
//   {"kind": "topk", "density": 0.01, "k": 671088, "ms": 35.1, "memcpy_ms": 21.0, ...}
//
// RunAndCapture starts a program with posix_spawn (no shell, so no quoting), returns its stdout
// and lets its stderr through. ParseFlatJson reads one flat JSON object (string keys; values are
// strings, numbers, true, false or null; no nesting), which is all the peer prints. JsonQuote
// writes a JSON string literal.
//
// Thread-safety: stateless functions. RunAndCapture blocks until the child exits.
#ifndef GRAVAC_BENCH_PEER_H_
#define GRAVAC_BENCH_PEER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace gravac::bench {

// Runs argv[0] (a path) with arguments argv and returns everything it wrote to stdout. Fails
// when it cannot be started, or exits non-zero or by a signal (the message says which).
absl::StatusOr<std::string> RunAndCapture(const std::vector<std::string>& argv);

struct JsonScalar {
  enum class Kind { kString, kNumber, kBool, kNull };
  Kind kind = Kind::kNull;
  std::string text;     // kString: the decoded string
  double number = 0.0;  // kNumber; kBool: 1 or 0
};
using FlatJson = std::map<std::string, JsonScalar, std::less<>>;

// Parses one flat JSON object; InvalidArgument naming the position of the first error.
absl::StatusOr<FlatJson> ParseFlatJson(std::string_view text);

// The number or string under `key`; InvalidArgument when it is missing or of another kind.
absl::StatusOr<double> GetNumber(const FlatJson& object, std::string_view key);
absl::StatusOr<std::string> GetString(const FlatJson& object, std::string_view key);

// `text` as a quoted JSON string literal.
std::string JsonQuote(std::string_view text);

// What the torch peer measured.
struct PeerTopK {
  double density = 0.0;
  int64_t k = 0;
  double topk_ms = 0.0;    // median of torch.topk(x.abs(), k) + gather
  double memcpy_ms = 0.0;  // median of a torch copy of the same bytes, interleaved with topk
};
struct PeerResult {
  std::string torch_version;
  int64_t threads = 0;
  int64_t n = 0;
  double memcpy_ms = 0.0;  // median over every interleaved copy of the run
  double clone_ms = 0.0;   // median of x.clone() (allocates: page faults included)
  std::vector<PeerTopK> topk;
};

// Reads the peer's stdout: one "env" line, one "memcpy" line and "topk" lines. Lines that do not
// start with '{' are ignored.
absl::StatusOr<PeerResult> ParsePeerOutput(std::string_view output);

}  // namespace gravac::bench

#endif  // GRAVAC_BENCH_PEER_H_
