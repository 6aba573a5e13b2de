#pragma once
// Errors that cross the library boundary. Library code never calls exit(): the CLI maps
// InputError to exit status 2 and everything else to 1.
#include <stdexcept>
#include <string>

namespace mlsim {

// Bad user input (scenario, trace, override). `path` is the JSON path ("system.bytes") or the
// file name and line, so the user can find what to fix.
class InputError : public std::runtime_error {
 public:
  InputError(std::string path, const std::string& what)
      : std::runtime_error(path.empty() ? what : path + ": " + what), path_(std::move(path)) {}
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A broken internal invariant: a bug in mlsim, never the user's fault.
class InvariantError : public std::logic_error {
  using std::logic_error::logic_error;
};

#define MLSIM_CHECK(cond, msg)                                                              \
  do {                                                                                      \
    if (!(cond))                                                                            \
      throw ::mlsim::InvariantError(std::string(__FILE__) + ":" + std::to_string(__LINE__) + \
                                    ": " + (msg));                                          \
  } while (0)

}  // namespace mlsim
