#pragma once
// The progress line on stderr: shown only when stderr is a terminal and the run has already taken
// a while, so short runs and redirected output stay clean.
#include <cstdio>

#include "sim_core/run/runner.hpp"

namespace mlsim {

class ProgressLine {
 public:
  // `enabled` is false for --quiet or when stderr is not a terminal.
  explicit ProgressLine(bool enabled, std::FILE* out = stderr) : enabled_(enabled), out_(out) {}
  ~ProgressLine() { clear(); }
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  static bool stderr_is_terminal();

  void update(const ProgressReport& r);
  // Erases the line (before the summary is printed).
  void clear();

  // Show nothing before this much wall time, then refresh at most this often.
  static constexpr double kQuietSeconds = 2.0;
  static constexpr double kRefreshSeconds = 0.5;

 private:
  bool enabled_;
  std::FILE* out_;
  bool shown_ = false;
  double last_shown_ = 0;
};

}  // namespace mlsim
