#pragma once
// Temporary files this process is writing, so that an interrupt does not leave them behind.
//
// Writers (results_writer, atomic_file) register each temporary while it exists. The CLI installs
// a handler for SIGINT, SIGTERM and SIGHUP that unlinks every registered file and then dies of
// the same signal (so the parent sees the usual status). SIGKILL cannot be caught: its leftovers,
// named NAME.tmp.PID, are removed by the next writer into the same folder once PID is no longer
// running (remove_stale_temporaries).
#include <filesystem>
#include <memory>

namespace mlsim {

// Registers `path` for removal on a fatal signal for as long as the object lives. Up to 64 files
// at once; beyond that the file is simply not covered (a writer holds one or a few at a time).
class TemporaryFile {
 public:
  explicit TemporaryFile(std::filesystem::path path);
  ~TemporaryFile();
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;
  TemporaryFile(TemporaryFile&& other) noexcept;
  TemporaryFile& operator=(TemporaryFile&&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::unique_ptr<char[]> c_path_;  // what the signal handler unlinks
  int slot_ = -1;
};

// Installs the handler (idempotent). Only programs call it, never the library.
void install_temporary_file_cleanup();

// The name a writer gives the temporary of `target` in this process: "PREFIX<name>.tmp.<pid>".
std::filesystem::path temporary_name(const std::filesystem::path& target, bool hidden);

// Removes files in `dir` named "<anything>.tmp.<pid>" whose pid is not a running process (the
// leftovers of a killed writer). Returns how many it removed.
int remove_stale_temporaries(const std::filesystem::path& dir);

}  // namespace mlsim
