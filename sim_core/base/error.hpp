#pragma once
// Errors that cross the library boundary. Library code never calls exit(): the CLI maps
// InputError to exit status 2 and everything else to 1.
#include <stdexcept>
#include <string>
#include <utility>

namespace mlsim {

// Bad user input (scenario, trace, override). `path` is the JSON path ("system.bytes") or the
// file name and line, so the user can find what to fix.
class InputError : public std::runtime_error {
 public:
  InputError(std::string path, const std::string& what)
      : InputError(std::string(), std::move(path), what) {}
  // `file` names the scenario file (or fragment, or "--set") the offending value came from.
  InputError(std::string file, std::string path, const std::string& what)
      : std::runtime_error(compose(file, path, what)),
        file_(std::move(file)),
        path_(std::move(path)),
        message_(what) {}
  const std::string& path() const { return path_; }
  const std::string& file() const { return file_; }
  // The explanation alone, without file and path.
  const std::string& message() const { return message_; }
  // The same error, attributed to `file`.
  InputError in_file(std::string file) const {
    return InputError(std::move(file), path_, message_);
  }

 private:
  static std::string compose(const std::string& file, const std::string& path,
                             const std::string& what) {
    std::string out = file.empty() ? "" : file + ": ";
    if (!path.empty()) out += path + ": ";
    return out + what;
  }
  std::string file_;
  std::string path_;
  std::string message_;
};

// A run that went past a limit it cannot exceed: the clock's range (292 years of nanoseconds) or
// the run's event or memory budget. The input was readable but asks for more than a run may do;
// the CLI reports it with exit status 1 and writes no results.
class LimitError : public std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Time arithmetic that would leave the int64 nanosecond range (time.hpp).
class ClockOverflow : public LimitError {
  using LimitError::LimitError;
};

// A broken internal invariant: a bug in mlsim, never the user's fault.
class InvariantError : public std::logic_error {
  using std::logic_error::logic_error;
};

#define MLSIM_CHECK(cond, msg)                                                               \
  do {                                                                                       \
    if (!(cond))                                                                             \
      throw ::mlsim::InvariantError(std::string(__FILE__) + ":" + std::to_string(__LINE__) + \
                                    ": " + (msg));                                           \
  } while (0)

}  // namespace mlsim
