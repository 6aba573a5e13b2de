#include "models/training/policies.hpp"

#include "models/training/all_reduce_sync.hpp"
#include "models/training/byte_scheduler.hpp"
#include "models/training/closed_form_sync.hpp"
#include "models/training/fifo_scheduler.hpp"
#include "models/training/ps_sync.hpp"
#include "models/training/reduce_scatter_all_gather_sync.hpp"

namespace mlsim::training {
namespace {

template <typename S>
SyncFactory sync() {
  return [](SyncSetup setup) -> std::unique_ptr<GradientSync> {
    return std::make_unique<S>(std::move(setup));
  };
}

SyncFactory closed_form(std::vector<collectives::Operation> operations) {
  return [operations](SyncSetup setup) -> std::unique_ptr<GradientSync> {
    return std::make_unique<ClosedFormSync>(std::move(setup), operations);
  };
}

SyncFactory all_reduce(collectives::Algorithm algorithm) {
  return [algorithm](SyncSetup setup) -> std::unique_ptr<GradientSync> {
    return std::make_unique<AllReduceSync>(std::move(setup), algorithm);
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
      .add("ring", "ring all-reduce among the workers (Horovod style)",
           all_reduce(collectives::Algorithm::kRing))
      .add("tree", "binary-tree all-reduce among the workers: reduce up, broadcast down",
           all_reduce(collectives::Algorithm::kTree))
      .add("rat",
           "RAT all-reduce: per-rack aggregators joined by the widest tree of racks over the "
           "links as they are when each chunk starts (APNet'20)",
           all_reduce(collectives::Algorithm::kRat))
      .add("reduce_scatter_all_gather",
           "the distributed optimizer (Megatron-LM, ZeRO-1): gradients reduce-scattered over "
           "the workers by ring, each shard updated, the parameters all-gathered back",
           sync<ReduceScatterAllGatherSync>())
      .add("ring_closed_form",
           "ring all-reduce in closed form, no traffic: collective_cost over the narrowest route "
           "between the workers' hosts (the execution graph's closed form, ASTRA-sim's "
           "analytical network)",
           closed_form({collectives::Operation::kAllReduce}))
      .add("reduce_scatter_all_gather_closed_form",
           "the distributed optimizer's reduce-scatter then all-gather, each in closed form "
           "(as ring_closed_form)",
           closed_form(
               {collectives::Operation::kReduceScatter, collectives::Operation::kAllGather}));
  p.orderings
      .add("job",
           "ByteScheduler over in-network aggregation: worker 0's scheduler orders the job's "
           "chunks, each starts on every worker at once when every worker produced it (as "
           "ByteScheduler's Horovod plugin)",
           Ordering::kJob)
      .add("every_worker",
           "every worker's ByteScheduler orders its own chunks within its own credit (deadlocks "
           "over in-network aggregation once workers drift apart)",
           Ordering::kEveryWorker)
      .add("rank0",
           "worker 0's ByteScheduler paces, the others send each chunk when ready (as "
           "ByteScheduler's MXNet PS plugin)",
           Ordering::kRankZero);
  return p;
}

}  // namespace

std::vector<PolicyInfo> TrainingPolicies::describe() const {
  std::vector<PolicyInfo> out;
  schedulers.describe(out);
  syncs.describe(out);
  orderings.describe(out);
  return out;
}

const TrainingPolicies& training_policies() {
  static const TrainingPolicies policies = build();
  return policies;
}

}  // namespace mlsim::training
