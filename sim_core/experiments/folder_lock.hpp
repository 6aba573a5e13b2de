#pragma once
// An exclusive lock on an experiment's output folder (flock on FOLDER/.lock), so two sweeps into
// one folder do not run every point twice and race on sweep.csv. The kernel releases the lock
// when the holder exits, however it exits, so a killed sweep never leaves a stale lock.
#include <filesystem>
#include <string>

namespace mlsim {

class FolderLock {
 public:
  // Creates the folder if needed. Throws InputError(where, ...) when another process holds the
  // lock, naming its pid (written into the lock file by the holder).
  FolderLock(const std::filesystem::path& folder, const std::string& where);
  ~FolderLock();
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace mlsim
