#include "models/ina/dsa_priority.hpp"

#include <algorithm>
#include <string>

#include "sim_core/base/error.hpp"

namespace mlsim::ina {

DsaPriorityKind dsa_priority_kind(std::string_view name, std::string_view path) {
  if (name == "tensor") return DsaPriorityKind::kTensor;
  if (name == "job") return DsaPriorityKind::kJob;
  throw InputError(std::string(path),
                   "unknown DSA priority \"" + std::string(name) + "\" (tensor | job)");
}

std::string_view dsa_priority_name(DsaPriorityKind kind) {
  return kind == DsaPriorityKind::kTensor ? "tensor" : "job";
}

DsaPriorities::DsaPriorities(DsaPriorityKind kind, const std::vector<double>& intensity,
                             const std::vector<std::uint32_t>& layers)
    : kind_(kind), layers_(layers) {
  MLSIM_CHECK(intensity.size() == layers.size(), "one intensity and layer count per job");
  std::vector<double> distinct = intensity;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  for (const double i : intensity)
    rank_.push_back(static_cast<std::uint32_t>(
        std::lower_bound(distinct.begin(), distinct.end(), i) - distinct.begin()));
  const auto ranks = static_cast<std::uint32_t>(std::max<std::size_t>(1, distinct.size()));
  if (ranks > 65536u)
    throw InputError("workload.jobs",
                     "DSA's 16-bit priority field cannot rank more than 65536 "
                     "distinct communication intensities");
  levels_ = kind == DsaPriorityKind::kTensor ? 65536u / ranks : 1u;
}

std::uint16_t DsaPriorities::of(std::size_t job, std::uint32_t layer) const {
  const std::uint32_t rank = rank_.at(job);
  if (kind_ == DsaPriorityKind::kJob) return static_cast<std::uint16_t>(rank);
  const std::uint32_t n = layers_.at(job);
  MLSIM_CHECK(layer < n, "layer outside its job");
  // Distance from the output side: the input layer (0) gets the largest key.
  const std::uint32_t from_output = n - 1 - layer;
  const std::uint32_t key =
      n <= levels_
          ? from_output
          : static_cast<std::uint32_t>(static_cast<std::uint64_t>(from_output) * levels_ / n);
  return static_cast<std::uint16_t>(rank * levels_ + key);
}

JobPriority DsaPriorities::of_job(std::size_t job) const {
  JobPriority out;
  out.rank = job_rank(job);
  for (std::uint32_t l = 0; l < layers_.at(job); ++l) out.by_layer.push_back(of(job, l));
  return out;
}

}  // namespace mlsim::ina
