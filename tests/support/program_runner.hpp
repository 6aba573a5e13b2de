#pragma once
// Runs a program as a user would from a shell, inside a scratch folder, with stdout and stderr
// captured in files (stderr is then not a terminal: mlsim prints no progress line).
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/support/temp_dir.hpp"

namespace mlsim::testing {

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Outcome {
  int status = -1;  // the exit status, -1 when the program did not exit normally
  std::string out, err;
};

// `command` through /bin/sh with `dir` as the working folder.
inline Outcome run_in(const TempDir& dir, const std::string& command) {
  const auto out = dir.path() / "stdout.txt";
  const auto err = dir.path() / "stderr.txt";
  const std::string cmd =
      "cd " + dir.path().string() + " && " + command + " > " + out.string() + " 2> " + err.string();
  const int raw = std::system(cmd.c_str());
  Outcome o;
  o.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  o.out = read_file(out);
  o.err = read_file(err);
  return o;
}

inline const std::string kMlsimProgram = std::string(MLSIM_BINARY_DIR) + "/cli/mlsim";

// `mlsim ARGS` run in `dir`.
inline Outcome run_mlsim(const TempDir& dir, const std::string& args) {
  return run_in(dir, kMlsimProgram + " " + args);
}

}  // namespace mlsim::testing
