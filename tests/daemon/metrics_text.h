// Test helper: reads one series' value out of the Prometheus text format (SerializeMetrics), so
// tests can assert exact values, e.g.
//   EXPECT_EQ(SeriesValue(SerializeMetrics(registry), "gravac_steps_total", {{"node", "n0"}}), 3);
// The label set must match exactly; a missing series is NaN (so EXPECT_EQ fails on it).
#ifndef GRAVAC_TESTS_DAEMON_METRICS_TEXT_H_
#define GRAVAC_TESTS_DAEMON_METRICS_TEXT_H_

#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <sstream>
#include <string>

namespace gravac::daemon::testing {

using SeriesLabels = std::map<std::string, std::string>;

// Parses `name{a="x",b="y"} value` (or `name value`); false for comments and malformed lines.
inline bool ParseSeriesLine(const std::string& line, std::string* name, SeriesLabels* labels,
                            double* value) {
  if (line.empty() || line[0] == '#') return false;
  labels->clear();
  size_t pos = line.find_first_of("{ ");
  if (pos == std::string::npos) return false;
  *name = line.substr(0, pos);
  if (line[pos] == '{') {
    ++pos;
    while (pos < line.size() && line[pos] != '}') {
      const size_t eq = line.find("=\"", pos);
      if (eq == std::string::npos) return false;
      std::string key = line.substr(pos, eq - pos);
      std::string val;
      size_t i = eq + 2;
      for (; i < line.size() && line[i] != '"'; ++i) {
        if (line[i] == '\\' && i + 1 < line.size()) ++i;
        val.push_back(line[i]);
      }
      (*labels)[key] = val;
      pos = i + 1;
      if (pos < line.size() && line[pos] == ',') ++pos;
    }
    ++pos;  // '}'
  }
  std::istringstream rest(line.substr(pos));
  std::string number;
  if (!(rest >> number)) return false;
  if (number == "+Inf") {
    *value = std::numeric_limits<double>::infinity();
  } else if (number == "NaN") {
    *value = std::numeric_limits<double>::quiet_NaN();
  } else {
    *value = std::strtod(number.c_str(), nullptr);
  }
  return true;
}

inline double SeriesValue(const std::string& text, const std::string& name,
                          const SeriesLabels& labels) {
  std::istringstream in(text);
  std::string n;
  SeriesLabels l;
  double v = 0;
  for (std::string line; std::getline(in, line);) {
    if (ParseSeriesLine(line, &n, &l, &v) && n == name && l == labels) return v;
  }
  return std::numeric_limits<double>::quiet_NaN();
}

// How many series of `name` the text holds.
inline int SeriesCount(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  std::string n;
  SeriesLabels l;
  double v = 0;
  int count = 0;
  for (std::string line; std::getline(in, line);) {
    if (ParseSeriesLine(line, &n, &l, &v) && n == name) ++count;
  }
  return count;
}

}  // namespace gravac::daemon::testing

#endif  // GRAVAC_TESTS_DAEMON_METRICS_TEXT_H_
