#pragma once
// Capacity search, as Vidur-Search does it for LLM serving (Agrawal et al., MLSys 2024): for each
// configuration of a grid (deployments, schedulers, batch limits, ...), the largest load (a
// scenario value such as workload.rate_scale) at which every constraint on the run's metrics
// still holds, found by bisection; then each configuration's cost and the cheapest one that
// sustains a target load. docs/sweeps.md describes the file.
//
// The load is searched on a geometric scale between `low` and `high` until high / low <= 1 +
// tolerance, assuming the constraints hold below some load and fail above it (more load, more
// queueing). A configuration that fails at `low` has no capacity in the range; one that holds at
// `high` has at least `high`.
#include <cstddef>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sim_core/experiments/run_request.hpp"
#include "sim_core/experiments/sweep.hpp"

namespace mlsim {

// "LHS OP RHS" with OP one of >=, <=, >, <; each side an expression (expression.hpp) over the
// run's metrics.
struct Constraint {
  std::string text;
  std::string lhs, op, rhs;
};
Constraint parse_constraint(const std::string& text, const std::string& where);
// Whether the constraint holds for these metrics. InputError naming `where` for an unknown
// metric (the run did not report it).
bool constraint_holds(const Constraint& c, const std::map<std::string, double>& metrics,
                      const std::string& where);

struct SearchSpec {
  SweepSpec configurations;  // the grid: one configuration per sweep point
  std::string load_path;     // the scenario value the load sets
  double low = 0, high = 0, tolerance = 0.05;
  std::vector<Constraint> constraints;
  // An expression over `names` (aliases of parameter paths, with each configuration's value)
  // and the metrics of the run at the capacity found; nothing: no cost.
  std::optional<std::string> cost;
  std::map<std::string, std::string> names;  // alias -> parameter path
  std::optional<double> target_load;
};

// A search file is a sweep file (sweep.hpp: scenario, variants, set, grid, points) with a
// "search" section: {"load": {"path", "low", "high", "tolerance"}, "constraints": [...],
// "cost", "names", "target_load"}. Strict: InputError naming the file and JSON path.
SearchSpec read_search_file(const std::filesystem::path& file);
SearchSpec parse_search_text(const std::string& text, const std::filesystem::path& file);

// The bisection for one configuration: which load to run next, and what the runs said.
class LoadBisection {
 public:
  LoadBisection(double low, double high, double tolerance);
  // The load to run next; nothing when done.
  std::optional<double> next() const;
  void record(double load, bool holds);
  bool done() const { return !next(); }
  // The largest load known to hold (nothing when even `low` fails).
  std::optional<double> capacity() const;
  bool at_least_high() const { return high_holds_; }  // holds at the top of the range

 private:
  double low_, high_, tolerance_;
  bool low_known_ = false, high_known_ = false, low_holds_ = false, high_holds_ = false;
  double lo_, hi_;  // lo_ holds, hi_ fails (once both ends are known)
};

struct SearchRow {
  SweepPoint configuration;
  std::optional<double> capacity;
  std::string bound;  // "bisected", "below_low" or "at_least_high"
  std::size_t runs = 0;
  std::optional<double> cost;
  std::map<std::string, double> metrics;  // of the run at the capacity (empty without one)
};

struct SearchResult {
  std::vector<SearchRow> rows;          // configuration order
  std::optional<std::size_t> cheapest;  // index of the cheapest row sustaining target_load
};

// Runs a batch of requests (in parallel, in the CLI) and returns their outcomes in order; a run
// that fails throws.
using BatchRunner = std::function<std::vector<RunOutcome>(const std::vector<RunRequest>&)>;

// Rounds of bisection, every unfinished configuration's next load in one batch per round.
SearchResult run_search(const SearchSpec& spec, const BatchRunner& run_batch);

// One row per configuration: parameters, capacity, bound, cost, capacity per cost, runs, then
// the constraint sides' metrics at the capacity.
std::string search_csv(const SearchSpec& spec, const SearchResult& result);
nlohmann::json search_json(const SearchSpec& spec, const SearchResult& result);
std::string search_table(const SearchSpec& spec, const SearchResult& result);

}  // namespace mlsim
