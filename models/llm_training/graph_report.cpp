#include "models/llm_training/graph_report.hpp"

#include <algorithm>

namespace mlsim::llm_training {

std::vector<std::string> exposure_names(const std::vector<std::string>& phases,
                                        bool critical_rank) {
  std::vector<std::string> names = {"compute_s"};
  for (std::size_t ph = 1; ph < phases.size(); ++ph)
    names.push_back("exposed_" + phases[ph] + "_s");
  if (critical_rank) {
    names.emplace_back("critical_rank_compute_s");
    for (std::size_t ph = 1; ph < phases.size(); ++ph)
      names.push_back("critical_rank_exposed_" + phases[ph] + "_s");
  }
  return names;
}

Exposure exposure_of(const std::vector<workload::RankReport>& reports,
                     const std::vector<std::string>& phases, double iterations) {
  Exposure e;
  Time end;
  for (std::size_t r = 0; r < reports.size(); ++r)
    if (reports[r].finished > end) {
      end = reports[r].finished;
      e.critical_rank = r;
    }
  // Per rank, averaged over ranks (every rank stands for the same number of GPUs), and on the
  // rank that finished last; per iteration; in exposure_names' order (the one list of names).
  std::vector<double> exposed(phases.size(), 0.0);
  double compute = 0;
  for (const auto& r : reports) {
    compute += r.compute_s;
    for (std::size_t ph = 0; ph < phases.size(); ++ph) exposed[ph] += r.exposed_s[ph];
  }
  const double n = static_cast<double>(std::max<std::size_t>(1, reports.size()));
  std::vector<double> values = {compute / n / iterations};
  for (std::size_t ph = 1; ph < phases.size(); ++ph) values.push_back(exposed[ph] / n / iterations);
  if (!reports.empty()) {
    const auto& c = reports[e.critical_rank];
    values.push_back(c.compute_s / iterations);
    for (std::size_t ph = 1; ph < phases.size(); ++ph)
      values.push_back(c.exposed_s[ph] / iterations);
  }
  std::vector<std::string> names = exposure_names(phases, !reports.empty());
  for (std::size_t i = 0; i < names.size(); ++i)
    e.figures.emplace_back(std::move(names[i]), values[i]);
  return e;
}

std::size_t report_exposure(const std::vector<workload::RankReport>& reports,
                            const std::vector<std::string>& phases, double iterations,
                            Results& out) {
  const Exposure e = exposure_of(reports, phases, iterations);
  for (const auto& [name, seconds] : e.figures) out.set_metric(name, seconds);
  out.details()["critical_rank"] = e.critical_rank;
  return e.critical_rank;
}

double report_graph_run(const workload::GraphExecutor& executor,
                        const workload::GraphSource& source, double iterations, Results& out) {
  const auto& reports = executor.reports();
  Time end;
  for (const auto& r : reports) end = std::max(end, r.finished);
  const double iteration_s = end.seconds() / iterations;
  out.set_metric("completed", executor.done() ? 1 : 0);
  out.set_metric("iteration_time_s", iteration_s);
  report_exposure(reports, source.phases(), iterations, out);
  const auto& counts = executor.counts();
  out.set_metric("nodes", static_cast<double>(counts.nodes));
  out.set_metric("kernels", static_cast<double>(counts.kernels));
  out.set_metric("collectives", static_cast<double>(counts.collectives));
  out.set_metric("messages", static_cast<double>(counts.messages));
  out.set_metric("network_collectives", static_cast<double>(counts.network_collectives));
  if (!executor.done()) out.details()["stalled"] = executor.stalled();
  return iteration_s;
}

std::string communication_description(workload::CommunicationMode mode) {
  return mode == workload::CommunicationMode::kNetwork
             ? "network: collectives and messages between hosts move their bytes through the "
               "network backend; within a host, the closed form"
             : "closed_form: collective_cost's closed form everywhere, no traffic (ASTRA-sim's "
               "analytical mode)";
}

}  // namespace mlsim::llm_training
