#pragma once
// Paper claims that mlsim reproduces (or documents that it does not), each with the band its
// figure must stay in. `mlsim check` reruns them; docs/claims.md describes the file format.
//
// A claim names a scenario, the runs it needs (a variant, a baseline variant, one or more cases of
// overrides), a metric and how the claim's figure is computed from it:
//   value           metric(variant)
//   ratio           metric(variant) / metric(baseline)
//   speedup         metric(baseline) / metric(variant)
//   reduction_pct   100 * (metric(baseline) - metric(variant)) / metric(baseline)
//   relative_error  |metric(variant) - closed_form| / |closed_form|, the closed form evaluated on
//                   values read from the run's resolved scenario
// With several cases the figure is aggregated over them (max, min or mean).
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sim_core/experiments/run_request.hpp"
#include "sim_core/scenario/json_reader.hpp"

namespace mlsim {

enum class FigureKind { value, ratio, speedup, reduction_pct, relative_error };
enum class ClaimStatus { reproduced, not_reproduced };
enum class Aggregate { only, max, min, mean };

struct Band {
  std::optional<double> min;  // inclusive
  std::optional<double> max;  // inclusive
  bool contains(double v) const;
  std::string describe() const;  // "[1.2, 1.5]", ">= 1.2", "<= 0.01"
};

// A closed form such as "2*(n-1)/n*S/B + 2*(n-1)*L", its variables read from the resolved
// scenario by JSON path. Quantities with units are converted to SI (bytes, bytes/s, seconds,
// FLOP/s) before evaluation.
struct ClosedForm {
  std::string expression;
  std::map<std::string, std::string> variables;  // name -> JSON path in the resolved scenario
};

struct ClaimCase {
  std::string label;  // "8 nodes, 64MiB" (derived from the overrides when not given)
  std::vector<std::pair<std::string, nlohmann::json>> overrides;
};

struct Recorded {
  double value = 0;
  std::string date;    // YYYY-MM-DD
  std::string commit;  // the commit the value was produced at
};

struct Claim {
  std::string id;
  std::string paper_title;
  std::string paper_venue;
  std::string figure;      // where in the paper: "Fig. 9", "Section 5.2"
  std::string conditions;  // under which conditions the paper states it
  std::string claim;       // the paper's statement, in words
  std::optional<double> paper_figure;
  std::filesystem::path scenario;  // resolved against the claims file's folder
  std::string scale;               // how the CI-sized runs differ from the paper's setup
  std::vector<std::pair<std::string, nlohmann::json>> set;  // overrides common to every run
  std::vector<ClaimCase> cases;                             // at least one
  std::string metric;
  FigureKind kind = FigureKind::value;
  std::optional<std::string> variant;
  std::optional<std::string> baseline;
  std::optional<ClosedForm> closed_form;
  Aggregate aggregate = Aggregate::only;
  Band band;
  std::optional<Recorded> recorded;
  ClaimStatus status = ClaimStatus::reproduced;
  std::string why;  // required when not reproduced: the figure mlsim gets and the reason
  // A claim looked at after its figure entered the band and left not reproduced: the figure is in
  // the band by something other than the paper's mechanism (noise, an [assumed] cost), as its
  // `why` says. Only with status not_reproduced.
  bool in_band_by_chance = false;
};

struct ClaimsFile {
  std::filesystem::path file;
  std::vector<Claim> claims;
  nlohmann::json document;  // as read (for --record, which rewrites `recorded` only)
};

// Parses one claim object. Relative scenario paths resolve against `base_dir`; when the object
// has no "scenario", `default_scenario` is used (claims in a scenario's own "expect" section).
Claim parse_claim(JsonReader& r, const std::filesystem::path& base_dir,
                  const std::optional<std::filesystem::path>& default_scenario = std::nullopt);
// Reads {"claims": [...]}; ids must be unique. Throws InputError naming the file and JSON path.
ClaimsFile read_claims_file(const std::filesystem::path& file);
ClaimsFile parse_claims_document(nlohmann::json doc, const std::filesystem::path& file);

// The runs a claim needs, de-duplicated, in a deterministic order.
std::vector<RunRequest> runs_needed(const Claim& c);

enum class Verdict {
  pass,               // reproduced and in band
  fail,               // reproduced claim whose figure left its band
  known_gap,          // not reproduced, and still outside the band
  now_in_band,        // marked not reproduced but now in band: update the claims file
  in_band_by_chance,  // not reproduced, in band, and marked in_band_by_chance after a look
  error,              // a run failed or a metric is missing
};
std::string_view verdict_name(Verdict v);
bool verdict_fails(Verdict v);  // fail or error: `mlsim check` exits non-zero

struct ClaimResult {
  std::string id;
  std::optional<double> figure;
  std::vector<double> case_figures;
  Verdict verdict = Verdict::error;
  std::string message;  // for errors
};

// Looks up the outcome of a run listed by runs_needed(); throws when that run failed.
using OutcomeLookup = std::function<const RunOutcome&(const RunRequest&)>;

// Computes the claim's figure from its runs and judges it against the band. Errors in runs or
// missing metrics become Verdict::error with a message, never an exception.
ClaimResult evaluate_claim(const Claim& c, const OutcomeLookup& outcome);

// The figure of one case from its runs' outcomes (exposed for tests).
double case_figure(const Claim& c, const RunOutcome& run, const RunOutcome* baseline);
// A value of the resolved scenario as an SI number: numbers as they are; strings parsed as
// bytes, bandwidth (bytes/s), duration (s) or FLOP rate. Throws InputError naming `path`.
double scenario_quantity(const nlohmann::json& scenario, const std::string& path);

std::string_view figure_kind_name(FigureKind k);

}  // namespace mlsim
