#include "models/training/policies.hpp"

#include "models/training/byte_scheduler.hpp"
#include "models/training/fifo_scheduler.hpp"
#include "models/training/ps_sync.hpp"
#include "models/training/ring_sync.hpp"

namespace mlsim::training {
namespace {

template <typename S>
SyncFactory sync() {
  return [](SyncSetup setup) -> std::unique_ptr<GradientSync> {
    return std::make_unique<S>(std::move(setup));
  };
}

TrainingPolicies build() {
  TrainingPolicies p;
  p.schedulers
      .add("fifo",
           "the framework's order: each gradient sent whole in the order it became ready, by "
           "the framework's communication engines",
           [](const SchedulerSetup& s) -> std::unique_ptr<CommScheduler> {
             return std::make_unique<FifoScheduler>(
                 s.fifo_engines.value_or(s.one_tensor_at_a_time ? 1 : 0));
           })
      .add("bytescheduler",
           "ByteScheduler: gradients cut into partitions, sent by layer priority within a "
           "credit of bytes in flight",
           [](const SchedulerSetup& s) -> std::unique_ptr<CommScheduler> {
             return std::make_unique<ByteScheduler>(s.config, s.immediate);
           });
  p.syncs
      .add("ps", "workers push gradients to parameter servers and pull the parameters back",
           sync<PsSync>())
      .add("ring", "ring all-reduce among the workers (Horovod style)", sync<RingSync>());
  return p;
}

}  // namespace

std::vector<PolicyInfo> TrainingPolicies::describe() const {
  std::vector<PolicyInfo> out;
  schedulers.describe(out);
  syncs.describe(out);
  return out;
}

const TrainingPolicies& training_policies() {
  static const TrainingPolicies policies = build();
  return policies;
}

}  // namespace mlsim::training
