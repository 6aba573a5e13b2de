#include "sim_core/run/results_writer.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <fstream>
#include <set>
#include <stdexcept>

#include "sim_core/base/error.hpp"

namespace mlsim {
namespace {

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

// Files written under temporary names, renamed together by commit(); the destructor removes
// whatever was not committed (and the folder, if this writer created it and it is empty).
class StagedFiles {
 public:
  explicit StagedFiles(std::filesystem::path dir) : dir_(std::move(dir)) {
    std::error_code ec;
    if (!std::filesystem::exists(dir_, ec)) {
      std::filesystem::create_directories(dir_);
      created_dir_ = true;
    } else if (!std::filesystem::is_directory(dir_, ec)) {
      throw std::runtime_error(dir_.string() + " exists and is not a folder");
    }
  }
  ~StagedFiles() {
    std::error_code ec;
    for (const auto& [tmp, final_name] : staged_) std::filesystem::remove(tmp, ec);
    if (!committed_ && created_dir_) std::filesystem::remove(dir_, ec);  // only if empty
  }
  StagedFiles(const StagedFiles&) = delete;
  StagedFiles& operator=(const StagedFiles&) = delete;

  void add(const std::string& name, const std::string& content) {
    const auto final_path = dir_ / name;
    const auto tmp = dir_ / fmt::format(".{}.tmp.{}", name, ::getpid());
    staged_.emplace_back(tmp, final_path);
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << content;
    out.flush();
    if (!out) throw std::runtime_error("cannot write " + tmp.string());
  }

  std::vector<std::filesystem::path> commit() {
    std::vector<std::filesystem::path> done;
    for (const auto& [tmp, final_path] : staged_) {
      std::filesystem::rename(tmp, final_path);
      done.push_back(final_path);
    }
    staged_.clear();
    committed_ = true;
    return done;
  }

 private:
  std::filesystem::path dir_;
  bool created_dir_ = false;
  bool committed_ = false;
  std::vector<std::pair<std::filesystem::path, std::filesystem::path>> staged_;
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
  j["scenario"] = run.resolved_scenario;
  j["wall"] = {
      {"wall_time_s", run.wall_seconds},
      {"events_per_s",
       run.wall_seconds > 0 ? static_cast<double>(info.events_processed) / run.wall_seconds : 0.0}};
  return j;
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

  StagedFiles staged(dir);
  for (const auto& [name, content] : files) staged.add(name, content);
  return staged.commit();
}

}  // namespace mlsim
