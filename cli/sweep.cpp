// `mlsim sweep SWEEP.json`: a grid of overrides over a scenario, in parallel, resumable, into one
// tidy CSV; or the same points as a job list for GNU parallel or a Slurm job array.
#include <fmt/format.h>

#include "cli/experiments.hpp"
#include "sim_core/base/error.hpp"
#include "sim_core/experiments/child_runs.hpp"
#include "sim_core/experiments/folder_lock.hpp"
#include "sim_core/experiments/sweep.hpp"

namespace mlsim {

CLI::App* add_sweep_command(CLI::App& app, SweepArgs& a) {
  auto* cmd = app.add_subcommand(
      "sweep",
      "Run a grid of overrides over a scenario into one CSV (resumable: finished points are "
      "skipped), or write it as a job list for GNU parallel / Slurm");
  cmd->add_option("sweep", a.file,
                  "Sweep file (docs/sweeps.md), or a scenario with a \"sweep\" section")
      ->required();
  cmd->add_option("--out", a.out,
                  "Folder for points/ and sweep.csv (default: results/sweeps/<sweep file name>)");
  cmd->add_option("-j,--jobs", a.jobs, "Points run at once")->check(CLI::Range(1, 1024));
  cmd->add_option("--emit-jobs", a.emit_jobs,
                  "Write jobs.txt (one `mlsim run` per unfinished point), parallel.sh, slurm.sh "
                  "and collect.sh into this folder instead of running");
  cmd->add_option("--mlsim", a.mlsim,
                  "The mlsim program the job list calls (default: this one's absolute path)");
  cmd->add_flag("--collect", a.collect,
                "Only gather the finished points into sweep.csv (after a job list ran)");
  return cmd;
}

int sweep_command(const SweepArgs& a, const Registries& registries) {
  const auto spec = read_sweep_file(a.file);
  const std::filesystem::path out =
      a.out ? std::filesystem::path(*a.out)
            : std::filesystem::path("results/sweeps") / std::filesystem::path(a.file).stem();
  const auto points = expand_sweep(spec);

  if (a.collect) {
    const FolderLock lock(out, "--out");
    const auto report = collect_sweep(spec, out);
    fmt::print("{}: {} of {} points\n", report.csv.string(), report.total - report.missing.size(),
               report.total);
    if (!report.missing.empty()) {
      fmt::print(stderr, "sweep: {} points have no result yet, e.g. {}\n", report.missing.size(),
                 (out / "points" / report.missing.front()).string());
      return 1;
    }
    return 0;
  }

  // Every point that still has to run is checked before the first one starts.
  for (const auto& p : points) {
    if (run_finished(point_dir(out, p))) continue;
    try {
      experiments::validate_request(p.request, registries);
    } catch (const InputError& e) {
      throw InputError(e.file(), e.path(),
                       fmt::format("{} (in sweep point {}: {})", e.message(), p.index,
                                   fmt::join(p.request.set_arguments(), " ")));
    }
  }

  if (a.emit_jobs) {
    const std::filesystem::path program =
        a.mlsim ? std::filesystem::path(*a.mlsim) : experiments::self_program();
    const auto n = emit_sweep_jobs(spec, out, program, *a.emit_jobs);
    fmt::print(
        "{}: {} jobs ({} points finished already)\n"
        "  GNU parallel: sh {}/parallel.sh [-j N] [--sshloginfile HOSTS]\n"
        "  Slurm:        sbatch {}/slurm.sh\n"
        "  then:         sh {}/collect.sh   (writes {})\n",
        (std::filesystem::path(*a.emit_jobs) / "jobs.txt").string(), n, points.size() - n,
        *a.emit_jobs, *a.emit_jobs, *a.emit_jobs, (out / "sweep.csv").string());
    return 0;
  }

  // One sweep per folder at a time: a second one would run every point again beside the first.
  const FolderLock lock(out, "--out");
  const auto report = run_sweep(spec, out, experiments::self_program(), a.jobs, false);
  // Counts that add up: the CSV's rows are the finished points, whatever ran this time.
  fmt::print(
      "{}: {} of {} points have results ({} ran now, {} of them failed; {} had finished "
      "before)\n",
      report.csv.string(), report.total - report.missing.size(), report.total, report.ran,
      report.failed.size(), report.skipped);
  for (const auto& f : report.failed) fmt::print(stderr, "sweep: point {}", f);
  return report.failed.empty() && report.missing.empty() ? 0 : 1;
}

}  // namespace mlsim
