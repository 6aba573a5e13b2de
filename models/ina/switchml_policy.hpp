#pragma once
// SwitchML (Sapio et al., NSDI 2021; p4lang/p4app-switchML) as papers.md section 2 describes it:
// - each job gets a fixed pool of `slots` slots when it starts, and streams its gradient through
//   them: chunk c goes to slot c mod slots, so a worker may send chunk c only after it received
//   the result of chunk c - slots (the slot is reused once its aggregate was multicast);
// - every slot has two copies (shadow copy): chunk c uses copy (c / slots) mod 2, so a result
//   stays readable for a worker that retransmits while the other copy already aggregates the next
//   chunk; the pool therefore holds 2 aggregators per slot;
// - no parameter server: the switch multicasts the aggregate as soon as it is complete;
// - a retransmitted packet whose chunk is complete in its copy gets the result unicast back (the
//   shadow copy keeps it while the other copy aggregates the next chunk); one whose bit is not
//   yet in its copy is aggregated like a first transmission (its first packet was lost).
// [inferred] The static partition is the switch's slots divided equally among `partitions`
//   jobs (the number of jobs in the workload unless set), assigned when a job starts and freed
//   when it ends; a job finding no free partition is an invariant failure (the scenario
//   reader prevents it).
#include <vector>

#include "models/ina/policy.hpp"

namespace mlsim::ina {

class SwitchMlPolicy : public AggregationPolicy {
 public:
  // `slot_units`: slots (or slot groups of a burst) in the switch; pool = 2 x slot_units. Job
  // ids below `max_jobs` are expected (the table grows for larger ones).
  SwitchMlPolicy(SwitchPorts& ports, std::size_t slot_units, int partitions, int max_jobs);
  std::string_view name() const override { return "switchml"; }
  bool uses_parameter_server() const override { return false; }
  std::uint32_t slot_window(std::uint16_t) const override { return slots_per_job_; }
  // A partition is free for a starting job (job_started needs one).
  bool has_free_partition() const;
  void job_started(std::uint16_t job) override;
  void job_finished(std::uint16_t job) override;
  void on_gradient(const Packet& p) override;

 private:
  std::uint32_t slots_per_job_;
  std::vector<int> partition_of_job_;  // -1 = none
  std::vector<bool> partition_in_use_;
};

}  // namespace mlsim::ina
