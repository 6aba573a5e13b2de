#pragma once
// Opening a file a scenario names (a trace, a layer profile, a catalog) with an error that says
// what is wrong and where the name came from. std::ifstream alone opens a folder "successfully"
// on Linux and then reads nothing, which readers reported as an "empty file" (issue 17).
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace mlsim {

// Throws InputError(where, "<what> <file>: not found" | ": is a folder, not a file" |
// ": not a regular file" | ": cannot be read (<reason>)"). `where` is the JSON path that named
// the file ("workload.trace").
std::ifstream open_input_file(const std::filesystem::path& file, const std::string& where,
                              std::string_view what);

// The whole file as text, with open_input_file's errors (sweep, search and claims files, group
// maps, calibrations: small files read at once).
std::string read_input_file(const std::filesystem::path& file, const std::string& where,
                            std::string_view what);

}  // namespace mlsim
