#pragma once
// Parameter sweeps: a grid (cartesian product of value lists) and explicit lists of overrides
// over one scenario, expanded into points in a fixed order, each point one `mlsim run` whose
// result lands in OUT/points/<id>/. A point's id is a hash of its variant and overrides, so a
// rerun (or a grown grid) finds the points already finished and skips them. docs/sweeps.md
// describes the file format.
#include <cstddef>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sim_core/experiments/run_request.hpp"

namespace mlsim {

using Overrides = std::vector<std::pair<std::string, nlohmann::json>>;

struct SweepSpec {
  std::filesystem::path file;         // the sweep file (or the scenario holding a "sweep" section)
  std::filesystem::path scenario;     // resolved against the sweep file's folder
  std::vector<std::string> variants;  // empty: the scenario as it is
  Overrides set;                      // the same for every point
  std::vector<std::pair<std::string, std::vector<nlohmann::json>>> grid;  // file order
  std::vector<Overrides> points;  // explicit override sets, crossed with the grid
};

struct SweepPoint {
  std::size_t index = 0;
  std::string id;        // 16 hex digits
  RunRequest request;    // set + grid values + point overrides
  Overrides parameters;  // the values that vary: one per column of the tidy CSV
};

// Reads a sweep file: either {"scenario": ..., "grid": ..., ...} or a scenario with a "sweep"
// section of the same shape (its "scenario" is then the file itself). Throws InputError naming
// the file and JSON path.
SweepSpec read_sweep_file(const std::filesystem::path& file);
SweepSpec parse_sweep_text(const std::string& text, const std::filesystem::path& file);

// Variants outermost, then the grid's paths in file order (the last varies fastest), then the
// explicit points.
std::vector<SweepPoint> expand_sweep(const SweepSpec& spec);
// The parameter columns: "variant" (when variants are swept), grid paths, then point paths in
// order of first appearance.
std::vector<std::string> parameter_columns(const SweepSpec& spec);

// A CSV cell, RFC 4180 quoted when it holds a comma, quote or line break.
std::string csv_cell(const std::string& s);
// A parameter's value as a cell's text: a string bare, anything else as JSON.
std::string value_cell(const nlohmann::json& v);
// 16 hex digits naming what a run does: its variant and overrides, in order (the scenario file is
// the sweep's, so it is left out). Sweep points and search runs name their folders by it.
std::string run_id(const RunRequest& r);

std::filesystem::path point_dir(const std::filesystem::path& out, const SweepPoint& p);

// One row per point (parameters, then every metric any point reported, sorted by name); points
// not in `outcomes` are left out. Cells are RFC 4180 quoted when needed; numbers are written in
// the shortest form that reads back exactly.
std::string tidy_csv(const SweepSpec& spec, const std::vector<SweepPoint>& points,
                     const std::map<std::size_t, RunOutcome>& outcomes);

struct SweepReport {
  std::size_t total = 0;
  std::size_t skipped = 0;  // already finished before this call
  std::size_t ran = 0;
  std::vector<std::string> failed;   // "id (status N, log: ...)" of points whose run failed
  std::vector<std::string> missing;  // ids of points with no result (collect)
  std::filesystem::path csv;
};

// Runs the unfinished points (at most `jobs` processes of `mlsim`), then collects.
SweepReport run_sweep(const SweepSpec& spec, const std::filesystem::path& out,
                      const std::filesystem::path& mlsim, int jobs, bool quiet);
// Reads every finished point and writes OUT/sweep.csv atomically, and OUT/sweep.meta.json (which
// columns are parameters, which metrics; how many points are finished).
SweepReport collect_sweep(const SweepSpec& spec, const std::filesystem::path& out);

// Writes DIR/jobs.txt (one `mlsim run` command per unfinished point, absolute paths), DIR/slurm.sh
// (a job array over jobs.txt), DIR/parallel.sh (GNU parallel, local or --sshloginfile) and
// DIR/collect.sh (`mlsim sweep FILE --out OUT --collect`). Returns the number of jobs written.
std::size_t emit_sweep_jobs(const SweepSpec& spec, const std::filesystem::path& out,
                            const std::filesystem::path& mlsim, const std::filesystem::path& dir);

}  // namespace mlsim
