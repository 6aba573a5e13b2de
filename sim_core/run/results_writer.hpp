#pragma once
// Writing a run's results to a folder: summary.json and one CSV per time series.
//
// Atomic: every file is first written under a temporary name in the target folder and renamed
// only once all of them are complete, so an interrupted or failed write leaves either the
// previous results or the new ones, never half of them (and no folder it created).
// Deterministic: the same run gives byte-identical files, except the "wall" object of
// summary.json, which holds everything that depends on the machine's clock.
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim_core/run/runner.hpp"

namespace mlsim {

struct WriteOptions {
  bool csv = true;
};

// The summary.json document: name, variant, seed, version, metrics, details, run (events,
// simulated time, network totals), series (CSV file names), scenario (resolved), wall.
nlohmann::json summary_json(const RunOutput& run, const WriteOptions& options = {});

// CSV text of one series: a "time_s" column (exact, from integer nanoseconds), then its columns.
std::string series_csv(const TimeSeries& series);

// A results folder made ready before a run, so that a run whose results could not be written is
// refused before it simulates: created when missing (with its parents) and checked writable by
// creating and removing a probe file. Throws InputError(where, ...) naming the folder and the
// reason (an empty name, a file in the way, no permission, a read-only or virtual file system).
// Unless kept, the destructor removes the folders it created again (when still empty), so a
// failed run leaves nothing behind.
class OutputFolder {
 public:
  OutputFolder(std::filesystem::path dir, const std::string& where);
  ~OutputFolder();
  OutputFolder(const OutputFolder&) = delete;
  OutputFolder& operator=(const OutputFolder&) = delete;
  const std::filesystem::path& path() const { return dir_; }
  void keep() { keep_ = true; }

 private:
  std::filesystem::path dir_;
  std::vector<std::filesystem::path> created_;  // innermost first
  bool keep_ = false;
};

// Writes summary.json and the CSVs into `dir` (created if needed); returns the files written.
// Series CSVs that a previous summary.json in `dir` listed and this run does not write are
// removed, so the folder holds exactly one run's results.
// Throws std::runtime_error (not InputError: the input was fine) when the files cannot be
// written, after removing whatever it had started.
std::vector<std::filesystem::path> write_results(const RunOutput& run,
                                                 const std::filesystem::path& dir,
                                                 const WriteOptions& options = {});

}  // namespace mlsim
