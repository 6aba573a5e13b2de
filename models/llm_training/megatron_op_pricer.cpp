#include "models/llm_training/megatron_op_pricer.hpp"

#include "sim_core/base/error.hpp"
#include "sim_core/collectives/collective.hpp"
#include "sim_core/collectives/intra_host.hpp"

namespace mlsim::llm_training {

using training::OpStep;

MegatronOpPricer::MegatronOpPricer(const ParallelLayout& layout, StageKernels kernels,
                                   const Compute& compute, std::vector<NodeId> hosts,
                                   const collectives::CostModel& costs, bool merge_steps,
                                   const LinkConditions* closed_form_links)
    : layout_(layout),
      kernels_(std::move(kernels)),
      compute_(compute),
      hosts_(std::move(hosts)),
      costs_(costs),
      merge_steps_(merge_steps) {
  groups_ = {&kernels_.attention_forward, &kernels_.mlp_forward,       &kernels_.attention_backward,
             &kernels_.mlp_backward,      &kernels_.embedding_forward, &kernels_.embedding_backward,
             &kernels_.head_forward,      &kernels_.head_backward};
  std::array<double, 8> unknown;
  unknown.fill(-1);
  seconds_.assign(hosts_.size(), unknown);
  all_reduce_.assign(hosts_.size(), Time::ns(-1));
  if (closed_form_links != nullptr)
    closed_form_ = std::make_unique<collectives::InterHostClosedForm>(*closed_form_links, costs_);
  MLSIM_CHECK(layout_.tp >= 1 && layout_.pp >= 1 && layout_.layers_per_stage >= 1,
              "a Megatron layout needs positive degrees");
}

void MegatronOpPricer::kernel(std::size_t worker, int k, std::vector<OpStep>& out) const {
  const std::vector<Work>& work = *groups_[static_cast<std::size_t>(k)];
  if (work.empty()) return;
  double& seconds = seconds_.at(worker)[static_cast<std::size_t>(k)];
  if (seconds < 0) {
    seconds = 0;
    for (const Work& w : work) seconds += compute_.nominal_seconds(hosts_[worker], w);
  }
  out.push_back({OpStep::Kind::kCompute, seconds, Time::zero()});
}

void MegatronOpPricer::all_reduce(std::size_t worker, std::vector<OpStep>& out) const {
  if (layout_.tp <= 1) return;
  Time& t = all_reduce_.at(worker);
  if (t < Time::zero()) {
    if (!tensor_group_spans_hosts(worker)) {
      t = collectives::intra_host_collective_time(costs_, collectives::Operation::kAllReduce,
                                                  layout_.tp, layout_.activation,
                                                  compute_.hardware().host(hosts_[worker]));
    } else if (closed_form_) {
      // GraphExecutor::launch's closed form for a group on several hosts: tp participants of one
      // GPU each, the first member's host link split among that host's GPUs.
      const std::span<const NodeId> group = tensor_group_hosts(worker);
      const HostHardware* first = compute_.hardware().host(group.front());
      t = closed_form_->time(collectives::Operation::kAllReduce, layout_.tp, layout_.activation,
                             group, first != nullptr ? first->gpus : 1);
    } else {
      t = Time::zero();  // through the network: the job runs it (MegatronCoreJob)
    }
  }
  // Not collapsed, each GPU of the group is a worker: the all-reduce waits for all of them.
  out.push_back({OpStep::Kind::kCollective, 0, t, !layout_.collapse_tensor_parallel});
}

void MegatronOpPricer::steps(std::size_t worker, const training::ScheduledOp& op,
                             std::vector<OpStep>& out) const {
  each_step(worker, op, out);
  if (!merge_steps_ || out.size() <= 1) return;
  double seconds = 0;
  Time collective = Time::zero();
  bool any_compute = false;
  for (const OpStep& s : out) {
    if (s.kind == OpStep::Kind::kCompute) {
      seconds += s.seconds;
      any_compute = true;
    } else {
      collective += s.duration;
    }
  }
  out.clear();
  if (any_compute) out.push_back({OpStep::Kind::kCompute, seconds, Time::zero()});
  if (collective > Time::zero())
    out.push_back({OpStep::Kind::kCollective, 0, collective, !layout_.collapse_tensor_parallel});
}

std::span<const NodeId> MegatronOpPricer::tensor_group_hosts(std::size_t worker) const {
  if (layout_.collapse_tensor_parallel) return {&hosts_.at(worker), 1};
  const auto tp = static_cast<std::size_t>(layout_.tp);
  return std::span<const NodeId>(hosts_).subspan(worker / tp * tp, tp);
}

bool MegatronOpPricer::tensor_group_spans_hosts(std::size_t worker) const {
  const std::span<const NodeId> group = tensor_group_hosts(worker);
  for (NodeId h : group)
    if (h != group.front()) return true;
  return false;
}

Time MegatronOpPricer::trailing_collectives(std::size_t worker,
                                            const training::ScheduledOp& op) const {
  std::vector<OpStep> steps;
  each_step(worker, op, steps);
  Time trailing = Time::zero();
  for (auto it = steps.rbegin(); it != steps.rend() && it->kind == OpStep::Kind::kCollective; ++it)
    trailing += it->duration;
  return trailing;
}

MegatronOpPricer::StepCounts MegatronOpPricer::count_steps(std::size_t worker,
                                                           const training::ScheduledOp& op) const {
  each_step(worker, op, scratch_);
  StepCounts c;
  for (const OpStep& s : scratch_) ++(s.kind == OpStep::Kind::kCompute ? c.kernels : c.all_reduces);
  return c;
}

void MegatronOpPricer::each_step(std::size_t worker, const training::ScheduledOp& op,
                                 std::vector<OpStep>& out) const {
  out.clear();
  MLSIM_CHECK(worker < hosts_.size(), "a Megatron op on a worker the pricer has no host for");
  const std::size_t layers =
      static_cast<std::size_t>(layout_.pp) * static_cast<std::size_t>(layout_.layers_per_stage);
  const bool first = op.first_layer == 0, last = op.end_layer == layers;
  auto forward_layer = [&] {
    kernel(worker, MegatronSource::kAttnF, out);
    all_reduce(worker, out);
    kernel(worker, MegatronSource::kMlpF, out);
    all_reduce(worker, out);
  };
  if (op.forward) {
    if (first) kernel(worker, MegatronSource::kEmbF, out);
    for (std::size_t l = op.first_layer; l < op.end_layer; ++l) forward_layer();
    if (last) kernel(worker, MegatronSource::kHeadF, out);
    return;
  }
  if (last) kernel(worker, MegatronSource::kHeadB, out);
  for (std::size_t l = op.first_layer; l < op.end_layer; ++l) {
    if (layout_.recompute) forward_layer();
    kernel(worker, MegatronSource::kMlpB, out);
    all_reduce(worker, out);
    kernel(worker, MegatronSource::kAttnB, out);
    all_reduce(worker, out);
  }
  if (first) kernel(worker, MegatronSource::kEmbB, out);
}

}  // namespace mlsim::llm_training
