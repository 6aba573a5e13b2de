#include "sim_core/experiments/sweep.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <iostream>
#include <set>

#include "sim_core/base/error.hpp"
#include "sim_core/base/input_file.hpp"
#include "sim_core/experiments/atomic_file.hpp"
#include "sim_core/experiments/child_runs.hpp"
#include "sim_core/experiments/overrides.hpp"
#include "sim_core/experiments/process_pool.hpp"
#include "sim_core/scenario/strict_json.hpp"

namespace mlsim {
namespace {

using ojson = nlohmann::ordered_json;

bool annotation(const std::string& key) {
  return key == "comment" || key.starts_with('_');
}

nlohmann::json plain(const ojson& v) {
  return nlohmann::json::parse(v.dump());
}

Overrides read_overrides(const ojson& obj, const std::string& where) {
  if (!obj.is_object())
    throw InputError(where, "expected an object of \"path\": value overrides, got " + obj.dump());
  Overrides out;
  for (const auto& [path, value] : obj.items()) {
    if (annotation(path)) continue;
    parse_override_path(path, where + "." + path);
    out.emplace_back(path, plain(value));
  }
  return out;
}

SweepSpec parse_section(const ojson& s, const std::filesystem::path& file, bool standalone) {
  const std::string root = standalone ? "" : "sweep.";
  if (!s.is_object()) throw InputError(root + "(root)", "expected an object");
  SweepSpec spec;
  spec.file = file;
  for (const auto& [key, value] : s.items()) {
    const std::string where = root + key;
    if (annotation(key)) continue;
    if (key == "scenario" && standalone) {
      if (!value.is_string()) throw InputError(where, "expected a file name");
      const std::filesystem::path p = value.get<std::string>();
      spec.scenario = (p.is_absolute() ? p : file.parent_path() / p).lexically_normal();
    } else if (key == "variants") {
      if (!value.is_array() || value.empty())
        throw InputError(where, "expected a non-empty array of variant names");
      for (const auto& v : value) {
        if (!v.is_string()) throw InputError(where, "expected variant names, got " + v.dump());
        spec.variants.push_back(v.get<std::string>());
      }
    } else if (key == "set") {
      spec.set = read_overrides(value, where);
    } else if (key == "grid") {
      if (!value.is_object()) throw InputError(where, "expected an object of \"path\": [values]");
      for (const auto& [path, values] : value.items()) {
        if (annotation(path)) continue;
        parse_override_path(path, where + "." + path);
        if (!values.is_array() || values.empty())
          throw InputError(where + "." + path, "expected a non-empty array of values");
        std::vector<nlohmann::json> vs;
        for (const auto& v : values) vs.push_back(plain(v));
        spec.grid.emplace_back(path, std::move(vs));
      }
    } else if (key == "points") {
      if (!value.is_array() || value.empty())
        throw InputError(where, "expected a non-empty array of override objects");
      for (std::size_t i = 0; i < value.size(); ++i)
        spec.points.push_back(read_overrides(value[i], fmt::format("{}[{}]", where, i)));
    } else if (key == "scenario") {
      throw InputError(where, "a sweep inside a scenario sweeps that scenario: remove this key");
    } else {
      // Shorthand: any other key is a grid path, `"system.bytes": ["1MiB", "1GiB"]`. A misspelt
      // path is reported by the scenario loader when the points are validated.
      parse_override_path(key, where);
      if (!value.is_array() || value.empty())
        throw InputError(where,
                         "expected a non-empty array of values (a grid path), or one of the keys " +
                             std::string(standalone ? "scenario, " : "") +
                             "variants, set, grid, points, comment");
      std::vector<nlohmann::json> vs;
      for (const auto& v : value) vs.push_back(plain(v));
      spec.grid.emplace_back(key, std::move(vs));
    }
  }
  if (standalone && spec.scenario.empty())
    throw InputError("scenario", "missing (required): the scenario file to sweep over");
  if (spec.variants.empty() && spec.grid.empty() && spec.points.empty())
    throw InputError(root.empty() ? "(root)" : "sweep",
                     "nothing to sweep: give \"grid\", \"points\" or \"variants\"");
  return spec;
}

std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

SweepSpec parse_sweep_text(const std::string& text, const std::filesystem::path& file) {
  // Strict like a scenario: no duplicate keys, bounded nesting.
  ojson doc = parse_strict_ordered_json(text, file.string());
  try {
    if (doc.is_object() && doc.contains("sweep")) {
      SweepSpec spec = parse_section(doc["sweep"], file, false);
      spec.scenario = file.lexically_normal();
      return spec;
    }
    return parse_section(doc, file, true);
  } catch (const InputError& e) {
    throw in_file(e, file);
  }
}

SweepSpec read_sweep_file(const std::filesystem::path& file) {
  return parse_sweep_text(read_input_file(file, "", "sweep file"), file);
}

std::vector<std::string> parameter_columns(const SweepSpec& spec) {
  std::vector<std::string> cols;
  if (!spec.variants.empty()) cols.push_back("variant");
  for (const auto& [path, values] : spec.grid) cols.push_back(path);
  std::set<std::string> seen(cols.begin(), cols.end());
  for (const auto& p : spec.points)
    for (const auto& [path, value] : p)
      if (seen.insert(path).second) cols.push_back(path);
  return cols;
}

std::vector<SweepPoint> expand_sweep(const SweepSpec& spec) {
  // Odometer over (variant, grid values..., point): the last dimension varies fastest.
  std::vector<std::size_t> sizes;
  sizes.push_back(std::max<std::size_t>(spec.variants.size(), 1));
  for (const auto& [path, values] : spec.grid) sizes.push_back(values.size());
  sizes.push_back(std::max<std::size_t>(spec.points.size(), 1));
  std::size_t total = 1;
  for (auto n : sizes) total *= n;

  std::vector<SweepPoint> out;
  out.reserve(total);
  std::vector<std::size_t> at(sizes.size(), 0);
  for (std::size_t i = 0; i < total; ++i) {
    SweepPoint p;
    p.index = i;
    p.request.scenario = spec.scenario;
    p.request.overrides = spec.set;
    if (!spec.variants.empty()) {
      p.request.variant = spec.variants[at[0]];
      p.parameters.emplace_back("variant", spec.variants[at[0]]);
    }
    for (std::size_t g = 0; g < spec.grid.size(); ++g) {
      const auto& [path, values] = spec.grid[g];
      p.request.overrides.emplace_back(path, values[at[g + 1]]);
      p.parameters.emplace_back(path, values[at[g + 1]]);
    }
    if (!spec.points.empty()) {
      for (const auto& [path, value] : spec.points[at.back()]) {
        p.request.overrides.emplace_back(path, value);
        p.parameters.emplace_back(path, value);
      }
    }
    p.id = run_id(p.request);
    out.push_back(std::move(p));
    for (std::size_t d = sizes.size(); d-- > 0;) {
      if (++at[d] < sizes[d]) break;
      at[d] = 0;
    }
  }
  return out;
}

std::string csv_cell(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string value_cell(const nlohmann::json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

std::string run_id(const RunRequest& r) {
  // What the run does (variant and every override), not a point's position, so a point keeps
  // its id, and its finished result, when the grid grows around it.
  nlohmann::json key = nlohmann::json::array();
  key.push_back(r.variant ? nlohmann::json(*r.variant) : nlohmann::json());
  for (const auto& [path, value] : r.overrides) key.push_back(nlohmann::json::array({path, value}));
  return fmt::format("{:016x}", fnv1a(key.dump()));
}

std::filesystem::path point_dir(const std::filesystem::path& out, const SweepPoint& p) {
  return out / "points" / p.id;
}

std::string tidy_csv(const SweepSpec& spec, const std::vector<SweepPoint>& points,
                     const std::map<std::size_t, RunOutcome>& outcomes) {
  const auto params = parameter_columns(spec);
  std::set<std::string> metric_set;
  for (const auto& [i, o] : outcomes)
    for (const auto& [name, v] : o.metrics) metric_set.insert(name);
  std::string out;
  bool first = true;
  for (const auto& c : params) {
    out += (first ? "" : ",") + csv_cell(c);
    first = false;
  }
  for (const auto& m : metric_set) {
    out += (first ? "" : ",") + csv_cell(m);
    first = false;
  }
  out += "\n";
  for (const auto& p : points) {
    const auto o = outcomes.find(p.index);
    if (o == outcomes.end()) continue;
    std::vector<std::string> cells;
    for (const auto& c : params) {
      std::string cell;
      for (const auto& [path, value] : p.parameters)
        if (path == c) cell = value_cell(value);
      cells.push_back(csv_cell(cell));
    }
    for (const auto& m : metric_set) {
      const auto it = o->second.metrics.find(m);
      cells.push_back(it == o->second.metrics.end() ? "" : fmt::format("{}", it->second));
    }
    for (std::size_t k = 0; k < cells.size(); ++k) out += (k ? "," : "") + cells[k];
    out += "\n";
  }
  return out;
}

SweepReport collect_sweep(const SweepSpec& spec, const std::filesystem::path& out) {
  SweepReport report;
  const auto points = expand_sweep(spec);
  report.total = points.size();
  std::map<std::size_t, RunOutcome> outcomes;
  for (const auto& p : points) {
    const auto dir = point_dir(out, p);
    if (run_finished(dir))
      outcomes.emplace(p.index, read_run_outcome(dir));
    else
      report.missing.push_back(p.id);
  }
  report.csv = out / "sweep.csv";
  write_file_atomically(report.csv, tidy_csv(spec, points, outcomes));
  // Which columns are parameters and which metrics, for tools/plot.py.
  std::set<std::string> metrics;
  for (const auto& [i, o] : outcomes)
    for (const auto& [name, v] : o.metrics) metrics.insert(name);
  const nlohmann::json meta{{"sweep", spec.file.string()},
                            {"scenario", spec.scenario.string()},
                            {"parameters", parameter_columns(spec)},
                            {"metrics", metrics},
                            {"points", points.size()},
                            {"finished", outcomes.size()}};
  write_file_atomically(out / "sweep.meta.json", meta.dump(2) + "\n");
  return report;
}

SweepReport run_sweep(const SweepSpec& spec, const std::filesystem::path& out,
                      const std::filesystem::path& mlsim, int jobs, bool quiet) {
  const auto points = expand_sweep(spec);
  std::vector<ChildRun> todo;
  std::vector<const SweepPoint*> todo_points;
  std::size_t skipped = 0;
  for (const auto& p : points) {
    if (run_finished(point_dir(out, p))) {
      ++skipped;
      continue;
    }
    todo.push_back({p.request, point_dir(out, p)});
    todo_points.push_back(&p);
  }
  if (!quiet)
    std::cerr << fmt::format("sweep: {} points, {} already finished, {} to run on {} job(s)\n",
                             points.size(), skipped, todo.size(), jobs);
  std::size_t done = 0;
  const auto failures = run_children(mlsim, todo, jobs, [&](std::size_t i, bool ok) {
    ++done;
    if (!quiet)
      std::cerr << fmt::format("sweep: [{}/{}] point {} {}\n", done, todo.size(),
                               todo_points[i]->id, ok ? "done" : "FAILED");
  });
  SweepReport report = collect_sweep(spec, out);
  report.skipped = skipped;
  report.ran = todo.size();
  for (const auto& f : failures)
    report.failed.push_back(fmt::format("{} (exit status {}, log {}):\n{}",
                                        todo_points[f.index]->id, f.status, f.log.string(),
                                        log_tail(f.log)));
  return report;
}

std::size_t emit_sweep_jobs(const SweepSpec& spec, const std::filesystem::path& out,
                            const std::filesystem::path& mlsim, const std::filesystem::path& dir) {
  const auto abs_out = std::filesystem::absolute(out).lexically_normal();
  std::string jobs;
  std::size_t n = 0;
  for (const auto& p : expand_sweep(spec)) {
    if (run_finished(point_dir(abs_out, p))) continue;
    RunRequest r = p.request;
    r.scenario = std::filesystem::absolute(r.scenario).lexically_normal();
    jobs += shell_command(run_command(mlsim, r, point_dir(abs_out, p))) + "\n";
    ++n;
  }
  const auto abs_dir = std::filesystem::absolute(dir).lexically_normal();
  const auto jobs_file = abs_dir / "jobs.txt";
  write_file_atomically(jobs_file, jobs);

  const std::string collect = shell_command(
      {mlsim.string(), "sweep", std::filesystem::absolute(spec.file).lexically_normal().string(),
       "--out", abs_out.string(), "--collect"});
  write_file_atomically(abs_dir / "collect.sh", "#!/bin/sh\n# Gathers the finished points into " +
                                                    (abs_out / "sweep.csv").string() + "\n" +
                                                    collect + "\n");
  write_file_atomically(
      abs_dir / "parallel.sh",
      fmt::format("#!/bin/sh\n"
                  "# Runs the sweep's points with GNU parallel: on this machine with\n"
                  "#   sh parallel.sh            (one job per core)\n"
                  "# or over ssh with\n"
                  "#   sh parallel.sh --sshloginfile HOSTS\n"
                  "# (the hosts must see the same paths, e.g. a shared file system). A rerun\n"
                  "# skips jobs the job log lists as done. Then run collect.sh.\n"
                  "parallel --joblog {} --resume \"$@\" < {}\n"
                  "{}\n",
                  shell_quote((abs_dir / "joblog").string()), shell_quote(jobs_file.string()),
                  collect));
  write_file_atomically(
      abs_dir / "slurm.sh",
      fmt::format("#!/bin/bash\n"
                  "# A Slurm job array over jobs.txt, one task per point:\n"
                  "#   sbatch slurm.sh        then, when every task is done: sh collect.sh\n"
                  "#SBATCH --job-name=mlsim-sweep\n"
                  "#SBATCH --array=0-{}\n"
                  "#SBATCH --cpus-per-task=1\n"
                  "#SBATCH --output={}/slurm-%A_%a.log\n"
                  "set -euo pipefail\n"
                  "line=$(sed -n \"$((SLURM_ARRAY_TASK_ID + 1))p\" {})\n"
                  "eval \"$line\"\n",
                  n == 0 ? 0 : n - 1, abs_dir.string(), shell_quote(jobs_file.string())));
  return n;
}

}  // namespace mlsim
