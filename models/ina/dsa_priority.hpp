#pragma once
// DSA's control-plane priority (Wang et al., ICNP 2023; papers.md section 2): the priority each
// chunk's packets carry into the switch, where a strictly higher priority preempts the aggregator
// (dsa_policy.hpp).
//
// What the paper says (its abstract; the body is not readable): the control plane "gives high
// priority to tensors whose acceleration benefits overall job efficiency most, e.g. tensors of
// communication-intensive jobs". Two readings, `system.dsa.priority`:
// - "tensor" (default): the job's communication intensity first, then, within a job, the tensor's
//   position: layers nearer the input higher. [inferred] Which of a job's tensors benefit its
//   efficiency most is not readable; the input-side layers are produced last by backward, so
//   their communication is the part no compute hides, and the next iteration's forward waits for
//   them first (ByteScheduler's argument), so accelerating them shortens the iteration most.
// - "job": the job's communication intensity only, every tensor of a job alike (the reading
//   before 2026-12-04; same-job chunks never preempt each other).
// Communication intensity = (gradient bytes on the wire per iteration / link speed) / compute
// time per iteration (slowest worker) [inferred: papers.md's "comm time / compute time"]. Jobs
// are compared by it; equal intensities tie. The ranks below are over the workload's jobs, but
// the order of two jobs depends on their two intensities only, so it is the order a control
// plane installs among the jobs present at any time (it never needs a job that has not arrived).
//
// The data plane's priority field is 16 bits [assumed: enough for the shipped workloads
// exactly]: priority = job rank x levels + layer key, levels = 65536 / ranks; a job with more
// layers than `levels` maps them onto the levels (adjacent layers may then tie). Higher wins.
#include <cstdint>
#include <string_view>
#include <vector>

namespace mlsim::ina {

enum class DsaPriorityKind { kTensor, kJob };

// What one job's packets carry: its rank (for output) and each layer's priority.
struct JobPriority {
  std::uint32_t rank = 0;
  std::vector<std::uint16_t> by_layer;  // forward order
};
DsaPriorityKind dsa_priority_kind(std::string_view name, std::string_view path);
std::string_view dsa_priority_name(DsaPriorityKind kind);

class DsaPriorities {
 public:
  // `intensity` and `layers` (in forward order, input first) per job.
  DsaPriorities(DsaPriorityKind kind, const std::vector<double>& intensity,
                const std::vector<std::uint32_t>& layers);

  // The job's rank among the distinct intensities: 0 = least communication-intensive.
  std::uint32_t job_rank(std::size_t job) const { return rank_.at(job); }
  // The priority of job `job`'s tensor of layer `layer` (forward order, 0 = input side).
  std::uint16_t of(std::size_t job, std::uint32_t layer) const;
  JobPriority of_job(std::size_t job) const;
  std::uint32_t levels() const { return levels_; }

 private:
  DsaPriorityKind kind_;
  std::vector<std::uint32_t> rank_, layers_;
  std::uint32_t levels_ = 1;  // layer keys per job rank
};

}  // namespace mlsim::ina
