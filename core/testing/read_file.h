// ReadFile: a file's whole text, for tests that read a process's log, port or output file.
//
// Thread-safety: stateless.
#ifndef GRAVAC_CORE_TESTING_READ_FILE_H_
#define GRAVAC_CORE_TESTING_READ_FILE_H_

#include <fstream>
#include <sstream>
#include <string>

namespace gravac::testing {

// The text of `path`; "" when it cannot be read.
inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace gravac::testing

#endif  // GRAVAC_CORE_TESTING_READ_FILE_H_
