#include "sim_core/run/results_writer.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "sim_core/base/error.hpp"
#include "sim_core/base/temporary_files.hpp"
#include "sim_core/run/budget.hpp"

namespace mlsim {
namespace {

constexpr const char* kTraceFile = "trace.json";

// Exact decimal seconds of an integer nanosecond count ("-0.000000500" style, 9 decimals).
std::string seconds_text(Time t) {
  const std::int64_t ns = t.count_ns();
  const std::uint64_t mag =
      ns < 0 ? 0 - static_cast<std::uint64_t>(ns) : static_cast<std::uint64_t>(ns);
  return fmt::format("{}{}.{:09}", ns < 0 ? "-" : "", mag / 1'000'000'000, mag % 1'000'000'000);
}

// Shortest text that reads back to the same double; "nan"/"inf" spelled for CSV readers.
std::string number_text(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{}", v);
}

void check_series_name(const std::string& name) {
  const bool ok =
      !name.empty() && name[0] != '.' && name != "summary" &&
      std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
      });
  MLSIM_CHECK(ok, "time series name \"" + name + "\" is not a plain file name");
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// The CSV names a previous summary.json in `dir` lists (to remove those the new run does not
// write: a rerun into the same folder must not leave a stale series beside the new summary).
std::set<std::string> previous_series(const std::filesystem::path& dir) {
  std::set<std::string> out;
  std::ifstream in(dir / "summary.json", std::ios::binary);
  if (!in) return out;
  std::stringstream text;
  text << in.rdbuf();
  const auto doc = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("series") || !doc["series"].is_array()) return out;
  // A trace the previous run wrote goes the same way when this run writes none.
  if (doc.contains("trace") && doc["trace"] == kTraceFile) out.insert(kTraceFile);
  for (const auto& name : doc["series"]) {
    if (!name.is_string()) continue;
    const auto n = name.get<std::string>();
    // Only plain file names this writer could have written, never a path elsewhere.
    if (n.size() > 4 && n.ends_with(".csv") && n.find('/') == std::string::npos && n[0] != '.')
      out.insert(n);
  }
  return out;
}

// Files written under temporary names, renamed together by commit(); the destructor removes
// whatever was not committed (and the folder, if this writer created it and it is empty). Each
// temporary is registered for removal on SIGINT/SIGTERM (temporary_files.hpp).
class StagedFiles {
 public:
  explicit StagedFiles(std::filesystem::path dir) : dir_(std::move(dir)) {
    std::error_code ec;
    if (!std::filesystem::exists(dir_, ec)) {
      std::filesystem::create_directories(dir_);
      created_dir_ = true;
    } else if (!std::filesystem::is_directory(dir_, ec)) {
      throw std::runtime_error(dir_.string() + " exists and is not a folder");
    } else {
      remove_stale_temporaries(dir_);  // left by a writer killed with SIGKILL
    }
  }
  ~StagedFiles() {
    std::error_code ec;
    for (const auto& f : staged_) std::filesystem::remove(f.tmp.path(), ec);
    if (!committed_ && created_dir_) std::filesystem::remove(dir_, ec);  // only if empty
  }
  StagedFiles(const StagedFiles&) = delete;
  StagedFiles& operator=(const StagedFiles&) = delete;

  void add(const std::string& name, const std::string& content) {
    const auto final_path = dir_ / name;
    staged_.push_back({TemporaryFile(temporary_name(final_path, /*hidden=*/true)), final_path});
    const auto& tmp = staged_.back().tmp.path();
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << content;
    out.flush();
    if (!out) throw std::runtime_error("cannot write " + tmp.string());
  }

  // Stages a copy of the file at `source` (e.g. a trace spilled to the temporary folder).
  void add_copy(const std::string& name, const std::filesystem::path& source) {
    const auto final_path = dir_ / name;
    staged_.push_back({TemporaryFile(temporary_name(final_path, /*hidden=*/true)), final_path});
    std::filesystem::copy_file(source, staged_.back().tmp.path(),
                               std::filesystem::copy_options::overwrite_existing);
  }

  std::vector<std::filesystem::path> commit() {
    std::vector<std::filesystem::path> done;
    for (const auto& f : staged_) {
      std::filesystem::rename(f.tmp.path(), f.final_path);
      done.push_back(f.final_path);
    }
    staged_.clear();
    committed_ = true;
    return done;
  }

 private:
  struct Staged {
    TemporaryFile tmp;
    std::filesystem::path final_path;
  };
  std::filesystem::path dir_;
  bool created_dir_ = false;
  bool committed_ = false;
  std::vector<Staged> staged_;
};

}  // namespace

std::string series_csv(const TimeSeries& s) {
  std::string out = "time_s";
  for (const auto& c : s.columns) out += "," + csv_field(c);
  out += "\n";
  for (const auto& [t, values] : s.rows) {
    MLSIM_CHECK(values.size() == s.columns.size(),
                fmt::format("series \"{}\": a row has {} values for {} columns", s.name,
                            values.size(), s.columns.size()));
    out += seconds_text(t);
    for (double v : values) out += "," + number_text(v);
    out += "\n";
  }
  return out;
}

nlohmann::json summary_json(const RunOutput& run, const WriteOptions& options) {
  const auto& info = run.info;
  nlohmann::json j;
  j["name"] = info.name;
  j["variant"] = info.variant ? nlohmann::json(*info.variant) : nlohmann::json(nullptr);
  j["seed"] = info.seed;
  j["version"] = info.version;
  j["metrics"] = nlohmann::json::object();
  for (const auto& [k, v] : run.results.metrics())
    j["metrics"][k] = std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(number_text(v));
  j["details"] = run.results.details();
  j["run"] = {
      {"model", info.model},
      {"backend", info.backend},
      {"events_processed", info.events_processed},
      {"simulated_time_ns", info.simulated_time.count_ns()},
      {"simulated_time_s", info.simulated_time.seconds()},
      {"hit_time_limit", info.hit_time_limit},
      {"network",
       {{"transfers_started", info.network.transfers_started},
        {"transfers_delivered", info.network.transfers_delivered},
        {"transfers_failed", info.network.transfers_failed},
        {"bytes_started", info.network.bytes_started.count},
        {"bytes_delivered", info.network.bytes_delivered.count},
        {"bytes_failed", info.network.bytes_failed.count}}},
  };
  j["series"] = nlohmann::json::array();
  if (options.csv)
    for (const auto& s : run.results.series()) j["series"].push_back(s.name + ".csv");
  if (run.trace) j["trace"] = kTraceFile;  // only when written: other runs' bytes do not change
  j["scenario"] = run.resolved_scenario;
  j["wall"] = {
      {"wall_time_s", run.wall_seconds},
      {"peak_rss_bytes", peak_resident_bytes()},
      {"events_per_s",
       run.wall_seconds > 0 ? static_cast<double>(info.events_processed) / run.wall_seconds : 0.0}};
  return j;
}

OutputFolder::OutputFolder(std::filesystem::path dir, const std::string& where)
    : dir_(std::move(dir)) {
  namespace fs = std::filesystem;
  auto refuse = [&](const std::string& why) {
    return InputError(where,
                      fmt::format("cannot write results into \"{}\": {}", dir_.string(), why));
  };
  if (dir_.empty()) throw refuse("the folder name is empty");
  std::error_code ec;
  // Which folders are missing, innermost first (removed again if the run does not finish).
  for (auto p = dir_; !p.empty(); p = p.parent_path()) {
    const auto st = fs::status(p, ec);
    if (fs::exists(st)) {
      if (!fs::is_directory(st)) throw refuse(p.string() + " exists and is not a folder");
      break;
    }
    created_.push_back(p);
    if (p == p.parent_path() || !p.has_relative_path()) break;
  }
  fs::create_directories(dir_, ec);
  if (ec) {
    created_.clear();
    throw refuse(ec.message());
  }
  // A probe file proves the folder takes files (permissions, read-only mounts, /proc, /sys).
  const auto probe = dir_ / fmt::format(".mlsim-write-probe.{}", ::getpid());
  {
    std::ofstream out(probe, std::ios::binary | std::ios::trunc);
    out << "probe\n";
    out.flush();
    if (!out) {
      const int err = errno;
      fs::remove(probe, ec);
      for (const auto& c : created_) fs::remove(c, ec);
      created_.clear();
      throw refuse(err ? std::strerror(err) : "the folder does not accept files");
    }
  }
  fs::remove(probe, ec);
}

OutputFolder::~OutputFolder() {
  if (keep_) return;
  std::error_code ignored;
  for (const auto& c : created_) std::filesystem::remove(c, ignored);  // only if empty
}

std::vector<std::filesystem::path> write_results(const RunOutput& run,
                                                 const std::filesystem::path& dir,
                                                 const WriteOptions& options) {
  // Everything that can fail on the model's side (bad series) fails before touching the disk.
  std::vector<std::pair<std::string, std::string>> files;
  std::set<std::string> names;
  if (options.csv) {
    for (const auto& s : run.results.series()) {
      check_series_name(s.name);
      MLSIM_CHECK(names.insert(s.name).second, "two time series named \"" + s.name + "\"");
      files.emplace_back(s.name + ".csv", series_csv(s));
    }
  }
  files.emplace_back("summary.json", summary_json(run, options).dump(2) + "\n");

  const auto stale = previous_series(dir);
  StagedFiles staged(dir);
  // The trace first: summary.json, staged last, is renamed last.
  if (run.trace) staged.add_copy(kTraceFile, run.trace->path());
  for (const auto& [name, content] : files) staged.add(name, content);
  auto written = staged.commit();
  // summary.json is renamed last (it is the last staged), so a reader never sees the new summary
  // beside an old series it does not list; now drop the old series it does not list.
  for (const auto& name : stale)
    if (std::none_of(files.begin(), files.end(), [&](const auto& f) { return f.first == name; }) &&
        !(run.trace && name == kTraceFile)) {
      std::error_code ignored;
      std::filesystem::remove(dir / name, ignored);
    }
  return written;
}

}  // namespace mlsim
