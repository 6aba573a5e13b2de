#include "models/commsched/policies.hpp"

namespace mlsim::commsched {
namespace {

CommschedPolicies build() {
  CommschedPolicies p;
  p.modes
      .add("ps", "workers push gradients to parameter servers and pull the parameters back",
           Mode::kParameterServer)
      .add("allreduce", "ring all-reduce among the workers (Horovod style)", Mode::kAllReduce);
  p.schedulers
      .add("fifo", "the framework's order: each gradient sent whole as soon as it is ready",
           SchedulerKind::kFifo)
      .add("bytescheduler",
           "ByteScheduler: gradients cut into partitions, sent by layer priority within a "
           "credit of bytes in flight",
           SchedulerKind::kByteScheduler);
  p.tuners.add("static", "ByteScheduler's partition and credit as given", Tuner::kStatic)
      .add("grid_best", "every grid point run over the whole scenario; the best run for real",
           Tuner::kGridBest)
      .add("bo",
           "ByteScheduler's auto-tuner: Bayesian optimisation (Gaussian process, expected "
           "improvement) during the run, then the best point",
           Tuner::kBayesian)
      .add("autobyte",
           "AutoByte-like: re-selects the grid point online from measured bandwidth and slowdowns",
           Tuner::kAutoByte);
  p.credit_scopes
      .add("push", "PS mode: a chunk holds its credit until its push has arrived",
           CreditScope::kPush)
      .add("push_pull", "PS mode: a chunk holds its credit until its pull is back",
           CreditScope::kPushPull);
  p.transports
      .add("none", "no per-message cost unless message_cpu / message_overhead give one",
           Transport::kNone)
      .add("tcp", "per-message costs of kernel TCP (30 us sender CPU, 50 us delay) [assumed]",
           Transport::kTcp)
      .add("rdma", "per-message costs of RDMA (3 us sender CPU, 10 us delay) [assumed]",
           Transport::kRdma);
  p.schedulings
      .add("every_worker", "PS mode: every worker's ByteScheduler orders and paces its chunks",
           Scheduling::kEveryWorker)
      .add("rank0",
           "PS mode, as ByteScheduler's MXNet plugin runs: worker 0 schedules, the others push "
           "every chunk as soon as it is ready",
           Scheduling::kRankZero);
  p.ps_connections
      .add("in_order",
           "PS mode, as ps-lite sends: one in-order connection per (worker, server); a push waits "
           "behind the worker's earlier pushes to the same server",
           PsConnections::kInOrder)
      .add("shared", "PS mode: every push leaves at once and shares the links (the older model)",
           PsConnections::kShared);
  return p;
}

}  // namespace

std::vector<PolicyInfo> CommschedPolicies::describe() const {
  std::vector<PolicyInfo> out;
  modes.describe(out);
  schedulers.describe(out);
  tuners.describe(out);
  credit_scopes.describe(out);
  transports.describe(out);
  schedulings.describe(out);
  ps_connections.describe(out);
  return out;
}

const CommschedPolicies& commsched_policies() {
  static const CommschedPolicies policies = build();
  return policies;
}

}  // namespace mlsim::commsched
