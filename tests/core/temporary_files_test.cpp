// Issue 17, defect 7: SIGINT or SIGTERM while results were written left `.NAME.csv.tmp.PID`
// forever. A registered temporary is removed by the handler, which then dies of the signal.
#include "sim_core/base/temporary_files.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <random>

namespace fs = std::filesystem;
using namespace mlsim;

namespace {

fs::path scratch() {
  std::random_device rd;
  const auto p = fs::temp_directory_path() / ("mlsim_tmpfiles_" + std::to_string(rd()));
  fs::create_directories(p);
  return p;
}

// In a child process: register `file`, create it, install the handler and raise `sig`.
int die_while_writing(const fs::path& file, const fs::path& unregistered, int sig) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    install_temporary_file_cleanup();
    TemporaryFile tmp(file);
    std::ofstream(tmp.path()) << "half a CSV";
    { TemporaryFile gone(unregistered); }  // registered and released again: must stay
    std::ofstream(unregistered) << "kept";
    ::raise(sig);
    ::_exit(0);  // not reached
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

}  // namespace

TEST(TemporaryFiles, AnInterruptRemovesRegisteredFilesAndKeepsTheSignalStatus) {
  for (int sig : {SIGINT, SIGTERM}) {
    const auto dir = scratch();
    const int status = die_while_writing(dir / ".x.csv.tmp.1", dir / "other", sig);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig) << "status " << status;
    EXPECT_FALSE(fs::exists(dir / ".x.csv.tmp.1"));
    EXPECT_TRUE(fs::exists(dir / "other"));
    fs::remove_all(dir);
  }
}

TEST(TemporaryFiles, NamesCarryThePidAndStaleOnesAreFound) {
  EXPECT_EQ(temporary_name("/a/b/summary.json", true).string(),
            "/a/b/.summary.json.tmp." + std::to_string(::getpid()));
  EXPECT_EQ(temporary_name("sweep.csv", false).string(),
            "sweep.csv.tmp." + std::to_string(::getpid()));
  const auto dir = scratch();
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  int status = 0;
  ::waitpid(dead, &status, 0);
  std::ofstream(dir / ("sweep.csv.tmp." + std::to_string(dead))) << "x";
  std::ofstream(dir / ("mine.tmp." + std::to_string(::getpid()))) << "x";  // this process: kept
  std::ofstream(dir / "data.tmp.notapid") << "x";                          // not a temporary
  EXPECT_EQ(remove_stale_temporaries(dir), 1);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 2);
  fs::remove_all(dir);
}
