// Issue 17, defect 7: two sweeps into one folder ran every point twice (no lock); killing a
// sweep's parent orphaned its children; a sweep with a failing point said "2 points (2 ran)"
// while its CSV had one row.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <thread>

#include "sim_core/base/error.hpp"
#include "sim_core/experiments/folder_lock.hpp"
#include "sim_core/experiments/process_pool.hpp"
#include "tests/support/program_runner.hpp"

using namespace mlsim;
using mlsim::testing::read_file;
using mlsim::testing::run_mlsim;
using mlsim::testing::TempDir;
namespace fs = std::filesystem;

namespace {

// Alive and not a zombie (an orphan's zombie may wait for a reaper that never comes in a
// container).
bool running(pid_t pid) {
  if (::kill(pid, 0) != 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

}  // namespace

TEST(FolderLock, ASecondHolderIsRefusedUntilTheFirstLetsGo) {
  TempDir dir;
  {
    FolderLock first(dir.path() / "out", "--out");
    try {
      FolderLock second(dir.path() / "out", "--out");
      FAIL() << "two locks on one folder";
    } catch (const InputError& e) {
      EXPECT_EQ(e.path(), "--out");
      EXPECT_NE(e.message().find("pid " + std::to_string(::getpid())), std::string::npos)
          << e.message();
    }
  }
  EXPECT_NO_THROW(FolderLock again(dir.path() / "out", "--out"));
}

TEST(ProcessPool, ChildrenDieWithTheirParentEvenOnSigkill) {
  TempDir dir;
  const auto pid_file = dir.path() / "child.pid";
  const pid_t parent = ::fork();
  if (parent == 0) {
    // The "sweep": one child that writes its pid and sleeps far longer than the test.
    run_commands({{{"/bin/sh", "-c", "echo $$ > " + pid_file.string() + "; exec sleep 300"},
                   dir.path() / "child.log"}},
                 1, [](std::size_t, int) {});
    ::_exit(0);
  }
  pid_t child = 0;
  for (int i = 0; i < 200 && child == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::ifstream in(pid_file);
    in >> child;
  }
  ASSERT_GT(child, 0) << "the child never started";
  ASSERT_TRUE(running(child));
  ::kill(parent, SIGKILL);
  int status = 0;
  ::waitpid(parent, &status, 0);
  bool gone = false;
  for (int i = 0; i < 250 && !gone; ++i) {
    gone = !running(child);
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(gone) << "child " << child << " outlived its killed parent";
  if (!gone) ::kill(child, SIGKILL);
}

TEST(ProcessPool, AProgramThatCannotStartReports127) {
  int seen = -1;
  run_commands({{{"/nonexistent/program"}, fs::temp_directory_path() / "mlsim_never.log"}}, 1,
               [&](std::size_t, int status) { seen = status; });
  EXPECT_EQ(seen, 127);
}

// A point that fails at run time (a 10-year link latency passes the bound for one duration, but
// the ring all-reduce's 2 x 63 steps add up to 1260 years, past the clock's 292): the counts
// must say so.
TEST(SweepCommand, AFailingPointIsCountedAndTheCsvAgrees) {
  TempDir dir;
  dir.write("s.json", R"({"name": "ring", "topology": {"kind": "ring", "hosts": 64,
      "link": {"bandwidth": "10Gbps", "latency": "1us"}},
      "system": {"model": "collectives", "algorithm": "ring", "bytes": "1MiB"}})");
  dir.write("sweep.json",
            R"({"scenario": "s.json", "grid": {"topology.link.latency": ["1us", "87600h"]}})");
  auto o = run_mlsim(dir, "sweep sweep.json --out out");
  EXPECT_EQ(o.status, 1) << o.out << o.err;
  EXPECT_NE(o.out.find("1 of 2 points have results (2 ran now, 1 of them failed; 0 had "
                       "finished before)"),
            std::string::npos)
      << o.out;
  const auto csv = read_file(dir.path() / "out/sweep.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 2) << csv;  // header + the one result
  EXPECT_NE(o.err.find("simulated time out of range"), std::string::npos) << o.err;
}

TEST(SweepCommand, ASecondSweepIntoTheSameFolderIsRefused) {
  TempDir dir;
  dir.write("s.json", R"({"name": "ring", "topology": {"kind": "ring", "hosts": 4,
      "link": {"bandwidth": "10Gbps", "latency": "1us"}},
      "system": {"model": "collectives", "algorithm": "ring", "bytes": "1MiB"}})");
  dir.write("sweep.json", R"({"scenario": "s.json", "grid": {"system.bytes": ["1MiB"]}})");
  FolderLock held(dir.path() / "out", "test");
  auto o = run_mlsim(dir, "sweep sweep.json --out out");
  EXPECT_EQ(o.status, 2) << o.out << o.err;
  EXPECT_NE(o.err.find("another mlsim (pid " + std::to_string(::getpid()) + ") is writing"),
            std::string::npos)
      << o.err;
  EXPECT_FALSE(fs::exists(dir.path() / "out/points"));
}
