#include "sim_core/experiments/process_pool.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <map>
#include <stdexcept>

#include "sim_core/base/error.hpp"

extern char** environ;

namespace mlsim {
namespace {

// Children started by one run_commands call; terminates and reaps them if the call unwinds.
class Children {
 public:
  Children() = default;
  Children(const Children&) = delete;
  Children& operator=(const Children&) = delete;
  ~Children() {
    for (const auto& [pid, index] : running_) ::kill(pid, SIGTERM);
    for (const auto& [pid, index] : running_) {
      int status = 0;
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
    }
  }

  // Returns false when the program could not be started.
  bool start(const ChildCommand& c, std::size_t index) {
    if (c.log.has_parent_path()) std::filesystem::create_directories(c.log.parent_path());
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, c.log.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    std::vector<char*> argv;
    for (const auto& a : c.argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    pid_t pid = 0;
    const int rc = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) return false;
    running_[pid] = index;
    return true;
  }

  std::size_t count() const { return running_.size(); }

  // Waits for one of our children; returns (index, status).
  std::pair<std::size_t, int> wait_one() {
    for (;;) {
      int status = 0;
      const pid_t pid = ::waitpid(-1, &status, 0);
      if (pid < 0) {
        if (errno == EINTR) continue;
        throw std::runtime_error("waitpid failed while children were running");
      }
      const auto it = running_.find(pid);
      if (it == running_.end()) continue;  // not one of ours
      const std::size_t index = it->second;
      running_.erase(it);
      if (WIFEXITED(status)) return {index, WEXITSTATUS(status)};
      if (WIFSIGNALED(status)) return {index, 128 + WTERMSIG(status)};
      return {index, 1};
    }
  }

 private:
  std::map<pid_t, std::size_t> running_;
};

}  // namespace

void run_commands(const std::vector<ChildCommand>& commands, int jobs,
                  const std::function<void(std::size_t, int)>& on_done) {
  MLSIM_CHECK(jobs >= 1, "run_commands needs at least one job slot");
  Children children;
  std::size_t next = 0;
  while (next < commands.size() || children.count() > 0) {
    while (next < commands.size() && children.count() < static_cast<std::size_t>(jobs)) {
      const std::size_t i = next++;
      MLSIM_CHECK(!commands[i].argv.empty(), "a child command needs a program");
      if (!children.start(commands[i], i)) on_done(i, 127);
    }
    if (children.count() == 0) continue;
    const auto [index, status] = children.wait_one();
    on_done(index, status);
  }
}

std::string shell_quote(const std::string& arg) {
  const bool plain = !arg.empty() && std::all_of(arg.begin(), arg.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("-_./=:,+@%").find(c) != std::string_view::npos;
  });
  if (plain) return arg;
  std::string out = "'";
  for (char c : arg) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

std::string shell_command(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    out += shell_quote(a);
  }
  return out;
}

}  // namespace mlsim
