#include "cli/progress_line.hpp"

#include <fmt/format.h>
#include <unistd.h>

namespace mlsim {

bool ProgressLine::stderr_is_terminal() {
  return ::isatty(STDERR_FILENO) == 1;
}

void ProgressLine::update(const ProgressReport& r) {
  if (!enabled_ || r.wall_seconds < kQuietSeconds) return;
  if (shown_ && r.wall_seconds - last_shown_ < kRefreshSeconds) return;
  std::string line = fmt::format("simulated {} | {:.2f} M events/s", to_string(r.simulated),
                                 r.events_per_second / 1e6);
  if (r.fraction_done >= 0) line += fmt::format(" | {:.1f}%", 100 * r.fraction_done);
  if (r.eta_seconds) line += fmt::format(" | ETA {:.0f} s", *r.eta_seconds);
  fmt::print(out_, "\r\033[K{}", line);
  std::fflush(out_);
  shown_ = true;
  last_shown_ = r.wall_seconds;
}

void ProgressLine::clear() {
  if (!shown_) return;
  fmt::print(out_, "\r\033[K");
  std::fflush(out_);
  shown_ = false;
}

}  // namespace mlsim
