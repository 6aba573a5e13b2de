// `mlsim check`: reruns every paper claim and fails when a figure leaves its band.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "cli/experiments.hpp"
#include "sim_core/base/error.hpp"
#include "sim_core/experiments/atomic_file.hpp"
#include "sim_core/experiments/child_runs.hpp"
#include "sim_core/experiments/claims.hpp"

namespace mlsim {
namespace {

std::string figure_text(double v) {
  return fmt::format("{:.4g}", v);
}

// The rows of the result table, widths computed from the content.
void print_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width(rows.front().size(), 0);
  for (const auto& r : rows)
    for (std::size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  for (std::size_t k = 0; k < rows.size(); ++k) {
    std::string line;
    for (std::size_t i = 0; i < rows[k].size(); ++i)
      line += fmt::format("{:<{}}", rows[k][i], i + 1 == rows[k].size() ? 0 : width[i] + 2);
    fmt::print("{}\n", line);
    if (k == 0) {
      std::size_t total = 0;
      for (auto w : width) total += w + 2;
      fmt::print("{}\n", std::string(total - 2, '-'));
    }
  }
}

std::string today() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

// The commit of the checkout holding the claims file ("unknown" outside a git checkout).
std::string current_commit(const std::filesystem::path& claims_file) {
  const auto dir = std::filesystem::absolute(claims_file).parent_path();
  const std::string cmd = "git -C '" + dir.string() + "' rev-parse --short=12 HEAD 2>/dev/null";
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[64];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    ::pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out.empty() ? "unknown" : out;
}

// Rewrites the claims file with each recorded figure replaced, nothing else changed but layout.
void record_figures(const ClaimsFile& file, const std::map<std::string, double>& figures) {
  std::ifstream in(file.file);
  std::stringstream text;
  text << in.rdbuf();
  auto doc = nlohmann::ordered_json::parse(text.str());
  const std::string date = today(), commit = current_commit(file.file);
  for (auto& c : doc["claims"]) {
    const auto it = figures.find(c["id"].get<std::string>());
    if (it == figures.end()) continue;
    c["recorded"] = {{"value", it->second}, {"date", date}, {"commit", commit}};
  }
  write_file_atomically(file.file, doc.dump(2) + "\n");
}

}  // namespace

CLI::App* add_check_command(CLI::App& app, CheckArgs& a) {
  auto* cmd = app.add_subcommand(
      "check", "Rerun the reproduced paper claims; exit status 1 when a figure leaves its band");
  cmd->add_option("--claims", a.claims, "Claims file (docs/claims.md)")->capture_default_str();
  cmd->add_option("--only", a.only, "Check only these claim ids (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("-j,--jobs", a.jobs, "Runs at once")->check(CLI::Range(1, 1024));
  cmd->add_option("--keep", a.keep, "Keep every run's results in this folder");
  cmd->add_flag("--record", a.record,
                "Write each passing figure (and known gaps) with today's date and the current "
                "commit into the claims' \"recorded\" fields; bands are never changed");
  return cmd;
}

int check_command(const CheckArgs& a, const Registries& registries) {
  const auto file = read_claims_file(a.claims);
  std::vector<const Claim*> claims;
  for (const auto& c : file.claims)
    if (a.only.empty() || std::find(a.only.begin(), a.only.end(), c.id) != a.only.end())
      claims.push_back(&c);
  for (const auto& id : a.only)
    if (std::none_of(file.claims.begin(), file.claims.end(),
                     [&](const Claim& c) { return c.id == id; }))
      throw InputError("--only", fmt::format("no claim \"{}\" in {}", id, a.claims));

  // Each distinct run once, even when several claims share it.
  experiments::ScratchFolder scratch(a.keep ? std::optional<std::filesystem::path>(*a.keep)
                                            : std::nullopt);
  std::vector<ChildRun> runs;
  std::map<std::string, std::size_t> index_of;
  for (const Claim* c : claims) {
    for (auto& r : runs_needed(*c)) {
      if (index_of.count(r.key())) continue;
      try {
        experiments::validate_request(r, registries);
      } catch (const InputError& e) {
        throw InputError(e.file(), e.path(), e.message() + " (claim " + c->id + ")");
      }
      index_of[r.key()] = runs.size();
      runs.push_back({r, scratch.path() / fmt::format("run-{:03}", runs.size())});
    }
  }
  fmt::print(stderr, "check: {} claims, {} runs on {} job(s)\n", claims.size(), runs.size(),
             a.jobs);
  const auto start = std::chrono::steady_clock::now();
  const auto failures = run_children(experiments::self_program(), runs, a.jobs, nullptr);
  std::map<std::size_t, std::string> failed;
  for (const auto& f : failures)
    failed[f.index] = fmt::format("run failed (exit status {}): {}\n{}", f.status, f.log.string(),
                                  log_tail(f.log));
  std::map<std::size_t, RunOutcome> outcomes;
  const OutcomeLookup lookup = [&](const RunRequest& r) -> const RunOutcome& {
    const std::size_t i = index_of.at(r.key());
    if (failed.count(i)) throw std::runtime_error(failed[i]);
    auto it = outcomes.find(i);
    if (it == outcomes.end()) it = outcomes.emplace(i, read_run_outcome(runs[i].out_dir)).first;
    return it->second;
  };

  std::vector<std::vector<std::string>> rows{
      {"claim", "paper", "figure", "simulated", "band", "paper says", "result"}};
  std::vector<std::string> details;
  std::map<std::string, double> to_record;
  bool any_fails = false;
  for (const Claim* c : claims) {
    const auto res = evaluate_claim(*c, lookup);
    rows.push_back(
        {c->id, c->paper_venue, c->figure,
         res.figure ? figure_text(*res.figure) + " " + std::string(figure_kind_name(c->kind)) : "-",
         c->band.describe(), c->paper_figure ? figure_text(*c->paper_figure) : "-",
         std::string(verdict_name(res.verdict))});
    any_fails = any_fails || verdict_fails(res.verdict);
    if (res.verdict == Verdict::error) details.push_back(c->id + ": " + res.message);
    if (res.verdict == Verdict::fail)
      details.push_back(fmt::format(
          "{}: {} is outside {} (recorded {})", c->id, figure_text(*res.figure), c->band.describe(),
          c->recorded ? figure_text(c->recorded->value) + " on " + c->recorded->date + " at " +
                            c->recorded->commit
                      : "nothing"));
    if (res.verdict == Verdict::now_in_band)
      details.push_back(c->id +
                        ": marked not reproduced, but now in its band: check it and mark "
                        "it reproduced, or mark it in_band_by_chance and say why in its why");
    if (res.verdict == Verdict::in_band_by_chance)
      details.push_back(c->id + ": in its band by chance, not reproduced (its why says why)");
    if (res.case_figures.size() > 1 && res.verdict != Verdict::pass)
      for (std::size_t k = 0; k < c->cases.size(); ++k)
        details.push_back(fmt::format("  {} [{}]: {}", c->id, c->cases[k].label,
                                      figure_text(res.case_figures[k])));
    if (res.figure && res.verdict != Verdict::fail) to_record[c->id] = *res.figure;
  }
  print_table(rows);
  for (const auto& d : details) fmt::print("{}\n", d);
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print("{}: {} claims checked in {:.1f} s wall\n", any_fails ? "FAILED" : "ok", claims.size(),
             secs);
  if (a.record) {
    record_figures(file, to_record);
    fmt::print("recorded {} figures in {}\n", to_record.size(), a.claims);
  }
  return any_fails ? 1 : 0;
}

}  // namespace mlsim
