#include "models/pipeline/stage_allreduce.hpp"

#include "models/training/policies.hpp"
#include "sim_core/base/error.hpp"

namespace mlsim::pipeline {

StageAllReduce::StageAllReduce(Engine& engine, Network& network, std::vector<NodeId> members,
                               std::int64_t bytes, const collectives::CostModel& costs,
                               const collectives::HostCosts& host, const LinkConditions* links,
                               std::function<void()> release)
    : members_(members.size()),
      bytes_(bytes),
      release_(std::move(release)),
      path_(engine, *this, training::training_policies().schedulers.get("fifo", "system").value,
            {}) {
  MLSIM_CHECK(members_ >= 2 && bytes_ > 0, "a stage all-reduce needs two replicas and bytes");
  training::SyncOptions o;
  o.workers = std::move(members);
  o.layer_parameters = {bytes_};
  o.bytes_per_parameter = 1;  // the stage's parameters in bytes
  o.host = host;
  o.costs = costs;
  o.links = links;
  o.window = 1;  // one NIC queue per replica, as one_f_one_b.hpp's estimate of the ring
  ring_ = training::training_policies()
              .syncs.get("ring", "system")
              .value(training::SyncSetup{engine, network, path_, std::move(o)});
  path_.set_sync(ring_.get());
}

void StageAllReduce::parameters_back(std::size_t, std::size_t) {
  if (++back_ < members_) return;
  back_ = 0;
  ++rounds_;
  release_();
}

void StageAllReduce::parameters_fetched(std::size_t, std::size_t) {
  MLSIM_CHECK(false, "a stage all-reduce fetches nothing");
}

}  // namespace mlsim::pipeline
