#include "models/cluster/pipeline_job.hpp"

#include <algorithm>
#include <numeric>

#include "sim_core/base/error.hpp"

namespace mlsim::cluster {

StageLayout split_stages(const std::vector<double>& layer_s, std::size_t stages,
                         std::size_t hosts) {
  const std::size_t layers = layer_s.size();
  MLSIM_CHECK(stages >= 1 && hosts >= 1 && layers >= 1, "a pipeline needs stages, hosts, layers");
  stages = std::min({stages, hosts, layers});
  StageLayout out;
  out.replicas.assign(stages, hosts / stages);
  const double total = std::accumulate(layer_s.begin(), layer_s.end(), 0.0);
  out.first_layer.push_back(0);
  double before = 0;  // compute of the layers before `l`
  std::size_t l = 0;
  for (std::size_t s = 1; s < stages; ++s) {
    const double target = total * static_cast<double>(s) / static_cast<double>(stages);
    // At least one layer for this stage, and one for each stage after it.
    const std::size_t lowest = out.first_layer.back() + 1, highest = layers - (stages - s);
    while (l < lowest || (l < highest && before < target)) before += layer_s[l++];
    out.first_layer.push_back(l);
  }
  out.first_layer.push_back(layers);
  return out;
}

std::size_t StageLayout::first_worker(std::size_t stage) const {
  std::size_t w = 0;
  for (std::size_t s = 0; s < stage; ++s) w += replicas[s];
  return w;
}

std::size_t StageLayout::rounds_multiple() const {
  std::size_t l = 1;
  for (std::size_t r : replicas) l = std::lcm(l, r);
  return l;
}

PipelineJob::PipelineJob(Engine& engine, Network& network, training::DataParallelJob& core,
                         StageLayout layout, Options options, std::function<void()> on_failed)
    : engine_(engine),
      core_(core),
      layout_(std::move(layout)),
      options_(std::move(options)),
      // GPipe: one flush per iteration (a group as large as the iteration, so every replica's
      // micro-batches are one group, however many it gets).
      schedule_(options_.schedule, layout_.first_layer, layout_.replicas,
                core.spec().workers.size(), options_.micro_batches * layout_.rounds_multiple(),
                options_.micro_batches * layout_.rounds_multiple()),
      messages_(engine, network, {options_.gradients.sync.costs, options_.gradients.sync.host, 0},
                options_.gradients.sync.links),
      on_failed_(std::move(on_failed)) {
  MLSIM_CHECK(core.spec().workers.size() == layout_.workers(), "a core worker per stage replica");
  MLSIM_CHECK(
      layout_.replicas.size() == layout_.stages() &&
          std::find(layout_.replicas.begin(), layout_.replicas.end(), 0) == layout_.replicas.end(),
      "every stage needs a replica");
  MLSIM_CHECK(options_.boundary_bytes.size() + 1 == layout_.stages(), "a size per boundary");
  // Deferred by the owner (it runs inside the network's delivery).
  auto failed = [this] {
    if (failed_) return;
    failed_ = true;
    if (on_failed_) on_failed_();
  };
  messages_.set_failure_callback(failed);
  gradients_ = std::make_unique<training::StageGradients>(engine, network, core, schedule_,
                                                          options_.gradients, failed);
}

PipelineJob::~PipelineJob() = default;

void PipelineJob::op_done(std::size_t w, const training::ScheduledOp& op) {
  const training::PipelineSchedule::Worker& wk = schedule_.worker(w);
  const std::size_t s = wk.stage, m = wk.replica + op.micro_batch * wk.replicas;
  // Micro-batch m's activation (forward) or gradient (backward) to the replica of stage `to`
  // that runs it (round-robin), across `boundary`.
  auto send = [this, w, m](std::size_t to, std::size_t boundary, bool activation) {
    const auto [dest, k] = schedule_.worker_of(to, m);
    const Bytes bytes{options_.boundary_bytes[boundary]};
    auto arrived = [this, dest, k, activation](const collectives::CollectiveResult&) {
      core_.input_arrived(dest, k, activation);
    };
    if (bytes.count <= 0) {
      engine_.schedule_in(Time::zero(), [arrived] { arrived(collectives::CollectiveResult{}); });
      return;
    }
    messages_.send(core_.spec().workers[w], core_.spec().workers[dest], bytes, arrived);
  };
  // The last stage computes the loss where its forward ends: its backward needs no message.
  if (op.forward && s + 1 < layout_.stages()) send(s + 1, s, true);
  if (!op.forward && s > 0) send(s - 1, s - 1, false);
}

}  // namespace mlsim::cluster
