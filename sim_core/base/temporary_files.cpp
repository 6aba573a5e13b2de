#include "sim_core/base/temporary_files.hpp"

#include <signal.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

namespace mlsim {
namespace {

constexpr int kSlots = 64;
// Read by the signal handler: lock-free atomics only.
std::array<std::atomic<const char*>, kSlots> g_registered{};
static_assert(std::atomic<const char*>::is_always_lock_free);

extern "C" void remove_temporaries_and_die(int sig) {
  for (auto& slot : g_registered)
    if (const char* p = slot.load()) ::unlink(p);  // async-signal-safe
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

}  // namespace

TemporaryFile::TemporaryFile(std::filesystem::path path) : path_(std::move(path)) {
  const std::string s = path_.string();
  c_path_ = std::make_unique<char[]>(s.size() + 1);
  std::memcpy(c_path_.get(), s.c_str(), s.size() + 1);
  for (int i = 0; i < kSlots; ++i) {
    const char* expected = nullptr;
    if (g_registered[i].compare_exchange_strong(expected, c_path_.get())) {
      slot_ = i;
      break;
    }
  }
}

TemporaryFile::TemporaryFile(TemporaryFile&& other) noexcept
    : path_(std::move(other.path_)), c_path_(std::move(other.c_path_)), slot_(other.slot_) {
  other.slot_ = -1;  // the slot still points at the same characters, now owned here
}

TemporaryFile::~TemporaryFile() {
  if (slot_ >= 0) g_registered[slot_].store(nullptr);  // before the characters are freed
}

void install_temporary_file_cleanup() {
  struct sigaction sa {};
  sa.sa_handler = remove_temporaries_and_die;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old {};
    ::sigaction(sig, nullptr, &old);
    if (old.sa_handler == SIG_IGN) continue;  // e.g. started under nohup: keep ignoring
    ::sigaction(sig, &sa, nullptr);
  }
}

std::filesystem::path temporary_name(const std::filesystem::path& target, bool hidden) {
  auto name =
      (hidden ? "." : "") + target.filename().string() + ".tmp." + std::to_string(::getpid());
  return target.parent_path() / name;
}

int remove_stale_temporaries(const std::filesystem::path& dir) {
  std::error_code ec;
  int removed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const auto at = name.rfind(".tmp.");
    if (at == std::string::npos || at + 5 == name.size()) continue;
    const std::string digits = name.substr(at + 5);
    if (digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const auto pid = static_cast<pid_t>(std::stol(digits));
    if (pid == ::getpid()) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // still running (or not ours to ask)
    std::error_code ignored;
    if (std::filesystem::remove(entry.path(), ignored)) ++removed;
  }
  return removed;
}

}  // namespace mlsim
