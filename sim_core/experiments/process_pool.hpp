#pragma once
// Running child processes, at most N at a time: how sweeps, comparisons and claim checks use
// both cores of a machine while each run stays a plain `mlsim run` (the same command a job list
// for GNU parallel or Slurm holds).
#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace mlsim {

struct ChildCommand {
  std::vector<std::string> argv;  // argv[0] is the program (a path; PATH is not searched)
  std::filesystem::path log;      // stdout and stderr go here (parent folders are created)
};

// Runs every command, at most `jobs` at once, in list order. `on_done(index, status)` is called
// in the parent as each finishes; status is the exit code, or 128 + signal number when the child
// was killed, or 127 when it could not be started. When an exception leaves (e.g. from
// on_done), children still running are terminated and reaped.
void run_commands(const std::vector<ChildCommand>& commands, int jobs,
                  const std::function<void(std::size_t, int)>& on_done);

// The shell form of a command, each argument single-quoted when it needs to be.
std::string shell_quote(const std::string& arg);
std::string shell_command(const std::vector<std::string>& argv);

}  // namespace mlsim
