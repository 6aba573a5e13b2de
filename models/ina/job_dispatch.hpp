#pragma once
// One switch running two aggregation programs side by side (SwitchML jobs' static partitions
// beside ATP's or DSA's shared pool, docs/ina.md "Mixed policies"): hands every packet addressed
// to the switch to its job's policy. Each policy keeps its own aggregators, so no aggregator can
// be held by jobs of both.
#include <vector>

#include "models/ina/policy.hpp"

namespace mlsim::ina {

class JobDispatch final : public SwitchProgram<Packet> {
 public:
  // `policy_of_job[j]` runs job j's packets; the policies must outlive the dispatch.
  JobDispatch(std::vector<AggregationPolicy*> policy_of_job, Time pipeline_latency)
      : policy_of_job_(std::move(policy_of_job)), pipeline_latency_(pipeline_latency) {}

  void on_message(const Packet& p, NodeId from) override {
    policy_of_job_[p.job]->on_message(p, from);
  }
  Time pipeline_latency() const override { return pipeline_latency_; }

 private:
  std::vector<AggregationPolicy*> policy_of_job_;
  Time pipeline_latency_;
};

}  // namespace mlsim::ina
