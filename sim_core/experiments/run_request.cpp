#include "sim_core/experiments/run_request.hpp"

#include "sim_core/base/error.hpp"

namespace mlsim {

std::string RunRequest::key() const {
  nlohmann::json k = nlohmann::json::array();
  k.push_back(scenario.lexically_normal().string());
  k.push_back(variant ? nlohmann::json(*variant) : nlohmann::json());
  for (const auto& [path, value] : overrides) k.push_back(nlohmann::json::array({path, value}));
  return k.dump();
}

std::vector<std::string> RunRequest::set_arguments() const {
  std::vector<std::string> out;
  for (const auto& [path, value] : overrides) out.push_back(set_argument(path, value));
  return out;
}

std::string set_argument(const std::string& path, const nlohmann::json& value) {
  if (value.is_string()) {
    const auto& s = value.get_ref<const std::string&>();
    // `mlsim run` reads a value as JSON when it parses as JSON: only then must it be quoted.
    if (!s.empty() && !nlohmann::json::accept(s)) return path + "=" + s;
  }
  return path + "=" + value.dump();
}

RunOutcome outcome_from_summary(const nlohmann::json& summary, const std::string& where) {
  if (!summary.is_object() || !summary.contains("metrics") || !summary["metrics"].is_object())
    throw InputError(where, "expected a summary.json object with a \"metrics\" object");
  RunOutcome out;
  for (const auto& [name, v] : summary["metrics"].items()) {
    if (!v.is_number())
      throw InputError(where, "metrics." + name + ": expected a number, got " + v.dump());
    out.metrics[name] = v.get<double>();
  }
  if (summary.contains("scenario")) out.scenario = summary["scenario"];
  out.summary = summary;
  return out;
}

}  // namespace mlsim
