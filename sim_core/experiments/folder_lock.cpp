#include "sim_core/experiments/folder_lock.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "sim_core/base/error.hpp"

namespace mlsim {

FolderLock::FolderLock(const std::filesystem::path& folder, const std::string& where) {
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  const auto file = folder / ".lock";
  fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw InputError(where,
                     fmt::format("cannot lock \"{}\": {}", file.string(), std::strerror(errno)));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    char holder[32] = {};
    [[maybe_unused]] const auto n = ::pread(fd_, holder, sizeof holder - 1, 0);
    ::close(fd_);
    fd_ = -1;
    std::string pid(holder);
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
    throw InputError(
        where,
        fmt::format("another mlsim{} is writing into \"{}\" (it holds {}); wait for "
                    "it to finish or choose another folder",
                    pid.empty() ? "" : " (pid " + pid + ")", folder.string(), file.string()));
  }
  const std::string me = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) == 0) {
    [[maybe_unused]] const auto n = ::pwrite(fd_, me.data(), me.size(), 0);
  }
}

FolderLock::~FolderLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

}  // namespace mlsim
