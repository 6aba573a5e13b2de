#include "sim_core/base/input_file.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include "sim_core/base/error.hpp"

namespace mlsim {

std::ifstream open_input_file(const std::filesystem::path& file, const std::string& where,
                              std::string_view what) {
  namespace fs = std::filesystem;
  auto fail = [&](const std::string& why) {
    return InputError(where, fmt::format("{} {}: {}", what, file.string(), why));
  };
  std::error_code ec;
  const auto st = fs::status(file, ec);
  if (!fs::exists(st)) throw fail("not found");
  if (fs::is_directory(st)) throw fail("is a folder, not a file");
  if (!fs::is_regular_file(st) && !fs::is_fifo(st)) throw fail("not a regular file");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw fail(fmt::format("cannot be read ({})", std::strerror(errno)));
  return in;
}

std::string read_input_file(const std::filesystem::path& file, const std::string& where,
                            std::string_view what) {
  std::ifstream in = open_input_file(file, where, what);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace mlsim
