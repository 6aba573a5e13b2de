#include "sim_core/experiments/atomic_file.hpp"

#include <fstream>
#include <stdexcept>
#include <string>

#include "sim_core/base/temporary_files.hpp"

namespace mlsim {

void write_file_atomically(const std::filesystem::path& path, std::string_view content) {
  const auto folder = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  std::filesystem::create_directories(folder);
  remove_stale_temporaries(folder);  // left by a writer killed with SIGKILL
  // The pid keeps two processes writing the same target from sharing a temporary; the
  // registration removes it if this process is interrupted before the rename.
  const TemporaryFile tmp(temporary_name(path, /*hidden=*/false));
  {
    std::ofstream out(tmp.path(), std::ios::binary | std::ios::trunc);
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.flush();
    if (!out) {
      std::error_code ignored;
      std::filesystem::remove(tmp.path(), ignored);
      throw std::runtime_error("cannot write " + tmp.path().string());
    }
  }
  std::filesystem::rename(tmp.path(), path);
}

}  // namespace mlsim
