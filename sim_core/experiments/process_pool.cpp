#include "sim_core/experiments/process_pool.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
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

  // Returns false when the program could not be started. The child is tied to this process:
  // if it dies (even by SIGKILL), the kernel sends the child SIGTERM (PR_SET_PDEATHSIG), so a
  // killed sweep leaves no orphan runs behind; the child's own handler removes its temporaries.
  bool start(const ChildCommand& c, std::size_t index) {
    if (c.log.has_parent_path()) std::filesystem::create_directories(c.log.parent_path());
    // Everything the child needs is prepared before fork: after it, only async-signal-safe calls.
    std::vector<char*> argv;
    for (const auto& a : c.argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const std::string log = c.log.string();
    const pid_t parent = ::getpid();
    int status_pipe[2];  // closed on exec; carries errno when exec fails
    if (::pipe2(status_pipe, O_CLOEXEC) != 0) return false;
    const pid_t pid = ::fork();
    if (pid < 0) {
      ::close(status_pipe[0]);
      ::close(status_pipe[1]);
      return false;
    }
    if (pid == 0) {
      ::close(status_pipe[0]);
      int err = 0;
      if (::prctl(PR_SET_PDEATHSIG, SIGTERM) != 0) err = errno;
      if (!err && ::getppid() != parent) ::_exit(127);  // the parent died before prctl
      const int fd = err ? -1 : ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (!err && fd < 0) err = errno;
      if (!err && (::dup2(fd, STDOUT_FILENO) < 0 || ::dup2(fd, STDERR_FILENO) < 0)) err = errno;
      if (!err) {
        if (fd > STDERR_FILENO) ::close(fd);
        ::execve(argv[0], argv.data(), environ);
        err = errno;
      }
      [[maybe_unused]] const auto n = ::write(status_pipe[1], &err, sizeof err);
      ::_exit(127);
    }
    ::close(status_pipe[1]);
    int err = 0;
    ssize_t n = 0;
    while ((n = ::read(status_pipe[0], &err, sizeof err)) < 0 && errno == EINTR) {
    }
    ::close(status_pipe[0]);
    if (n > 0) {  // exec failed: reap the child now
      int status = 0;
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      return false;
    }
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
