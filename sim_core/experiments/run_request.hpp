#pragma once
// The unit of work of every experiment (claim, comparison, sweep point): one run of a scenario,
// optionally with a named variant and --set style overrides, and what comes back from it.
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mlsim {

struct RunRequest {
  std::filesystem::path scenario;
  std::optional<std::string> variant;
  // Applied in order after the variant, like `mlsim run --set path=value`.
  std::vector<std::pair<std::string, nlohmann::json>> overrides;

  // A canonical text identifying the request (for de-duplication and as a map key).
  std::string key() const;
  // The --set arguments, each value written so that `mlsim run` reads back exactly `value`.
  std::vector<std::string> set_arguments() const;
};

struct RunOutcome {
  std::map<std::string, double> metrics;
  nlohmann::json scenario;  // the resolved scenario the run echoed (closed forms read it)
  nlohmann::json summary;   // the whole summary.json, for writers that keep it
};

// Reads metrics and the resolved scenario out of a summary.json document (results_writer.hpp's
// format). Throws InputError naming `where` when the document does not have that shape.
RunOutcome outcome_from_summary(const nlohmann::json& summary, const std::string& where);

// "path=value" for `mlsim run --set`: the value as JSON, except a string that would not parse as
// JSON, which is written bare ("workload.bytes=64MiB" rather than "workload.bytes=\"64MiB\"").
std::string set_argument(const std::string& path, const nlohmann::json& value);

// Runs one request and returns its outcome; throws on failure. Implemented by the CLI (a child
// `mlsim run`) and by tests (fakes).
using RunFunction = std::function<RunOutcome(const RunRequest&)>;

}  // namespace mlsim
