#include "models/llm_training/megatron_op_pricer.hpp"

#include "sim_core/base/error.hpp"
#include "sim_core/collectives/collective.hpp"
#include "sim_core/collectives/intra_host.hpp"

namespace mlsim::llm_training {

using training::OpStep;

MegatronOpPricer::MegatronOpPricer(const ParallelLayout& layout, StageKernels kernels,
                                   const Compute& compute, std::vector<NodeId> hosts,
                                   const collectives::CostModel& costs)
    : layout_(layout),
      kernels_(std::move(kernels)),
      compute_(compute),
      hosts_(std::move(hosts)),
      costs_(costs) {
  MLSIM_CHECK(layout_.tp >= 1 && layout_.pp >= 1 && layout_.layers_per_stage >= 1,
              "a Megatron layout needs positive degrees");
}

void MegatronOpPricer::kernel(NodeId host, const std::vector<Work>& work,
                              std::vector<OpStep>& out) const {
  if (work.empty()) return;
  double seconds = 0;
  for (const Work& w : work) seconds += compute_.nominal_seconds(host, w);
  out.push_back({OpStep::Kind::kCompute, seconds, Time::zero()});
}

void MegatronOpPricer::all_reduce(NodeId host, std::vector<OpStep>& out) const {
  if (layout_.tp <= 1) return;
  const Time t = collectives::intra_host_collective_time(costs_, collectives::Operation::kAllReduce,
                                                         layout_.tp, layout_.activation,
                                                         compute_.hardware().host(host));
  out.push_back({OpStep::Kind::kCollective, 0, t});
}

void MegatronOpPricer::steps(std::size_t worker, const training::ScheduledOp& op,
                             std::vector<OpStep>& out) const {
  out.clear();
  const NodeId host = hosts_.at(worker);
  const std::size_t layers =
      static_cast<std::size_t>(layout_.pp) * static_cast<std::size_t>(layout_.layers_per_stage);
  const bool first = op.first_layer == 0, last = op.end_layer == layers;
  auto forward_layer = [&] {
    kernel(host, kernels_.attention_forward, out);
    all_reduce(host, out);
    kernel(host, kernels_.mlp_forward, out);
    all_reduce(host, out);
  };
  if (op.forward) {
    if (first) kernel(host, kernels_.embedding_forward, out);
    for (std::size_t l = op.first_layer; l < op.end_layer; ++l) forward_layer();
    if (last) kernel(host, kernels_.head_forward, out);
    return;
  }
  if (last) kernel(host, kernels_.head_backward, out);
  for (std::size_t l = op.first_layer; l < op.end_layer; ++l) {
    if (layout_.recompute) forward_layer();
    kernel(host, kernels_.mlp_backward, out);
    all_reduce(host, out);
    kernel(host, kernels_.attention_backward, out);
    all_reduce(host, out);
  }
  if (first) kernel(host, kernels_.embedding_backward, out);
}

}  // namespace mlsim::llm_training
