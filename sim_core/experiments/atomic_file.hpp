#pragma once
// Writing a file so that readers see either the old content or the new one, never half of it:
// the text goes to a temporary name in the same folder, which is then renamed over the target.
#include <filesystem>
#include <string_view>

namespace mlsim {

// Creates missing parent folders. Throws std::runtime_error when the file cannot be written.
void write_file_atomically(const std::filesystem::path& path, std::string_view content);

}  // namespace mlsim
