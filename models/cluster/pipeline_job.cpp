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

// The replicas of stage s (the core's workers first .. first + replicas) and its layers, as one
// GradientOwner whose gradient path and strategy synchronise them.
class PipelineJob::Stage final : public training::GradientOwner {
 public:
  Stage(Engine& engine, training::DataParallelJob& core, std::size_t first_worker,
        std::size_t replicas, std::size_t first_layer, std::size_t end_layer,
        const Options& options)
      : core_(core),
        first_worker_(first_worker),
        replicas_(replicas),
        first_layer_(first_layer),
        end_layer_(end_layer),
        path_(engine, *this, options.make_scheduler, options.config) {}

  std::size_t gradient_workers() const override { return replicas_; }
  std::size_t gradient_layers() const override { return end_layer_ - first_layer_; }
  std::int64_t layer_parameters(std::size_t l) const override {
    return core_.spec().parameters[first_layer_ + l];
  }
  void parameters_back(std::size_t w, std::size_t l) override {
    core_.parameters_back(first_worker_ + w, first_layer_ + l);
  }
  void parameters_fetched(std::size_t, std::size_t) override {
    MLSIM_CHECK(false, "a pipeline stage fetches no layer");
  }
  void check_progress() override { core_.check_progress(); }
  std::size_t updates(std::size_t w, std::size_t l) const override {
    return core_.updates(first_worker_ + w, first_layer_ + l);
  }

  std::size_t first_worker() const { return first_worker_; }
  std::size_t first_layer() const { return first_layer_; }
  training::GradientPath& path() { return path_; }
  const training::GradientPath& path() const { return path_; }
  std::unique_ptr<training::GradientSync> sync;

 private:
  training::DataParallelJob& core_;
  std::size_t first_worker_, replicas_, first_layer_, end_layer_;
  training::GradientPath path_;
};

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
      messages_(engine, network, {options_.sync.costs, options_.sync.host, 0}, options_.sync.links),
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
  for (std::size_t s = 0; s < layout_.stages(); ++s) {
    const std::size_t replicas = layout_.replicas[s];
    if (replicas < 2) {
      stages_.push_back(nullptr);
      continue;
    }
    const std::size_t first = layout_.first_worker(s);
    auto stage = std::make_unique<Stage>(engine, core, first, replicas, layout_.first_layer[s],
                                         layout_.first_layer[s + 1], options_);
    training::SyncOptions o = options_.sync;
    o.workers.assign(core.spec().workers.begin() + static_cast<std::ptrdiff_t>(first),
                     core.spec().workers.begin() + static_cast<std::ptrdiff_t>(first) +
                         static_cast<std::ptrdiff_t>(replicas));
    o.servers = o.workers;  // colocated parameter servers (ps only), as a data-parallel job's
    o.layer_parameters.assign(
        core.spec().parameters.begin() + static_cast<std::ptrdiff_t>(layout_.first_layer[s]),
        core.spec().parameters.begin() + static_cast<std::ptrdiff_t>(layout_.first_layer[s + 1]));
    stage->sync = options_.make_sync(training::SyncSetup{engine, network, stage->path(), o});
    stage->path().set_sync(stage->sync.get());
    stage->sync->set_on_failed(failed);
    stages_.push_back(std::move(stage));
  }
}

PipelineJob::~PipelineJob() = default;

void PipelineJob::gradient_ready(std::size_t w, std::size_t layer) {
  const std::size_t s = schedule_.worker(w).stage;
  if (!stages_[s]) {
    core_.parameters_back(w, layer);  // one replica: the update is local, nothing to send
    return;
  }
  Stage& stage = *stages_[s];
  stage.path().gradient_ready(w - stage.first_worker(), layer - stage.first_layer());
}

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

std::int64_t PipelineJob::gradient_bytes_sent() const {
  std::int64_t n = 0;
  for (const auto& s : stages_)
    if (s) n += s->sync->bytes_sent();
  return n;
}

std::int64_t PipelineJob::gradient_bytes_delivered() const {
  std::int64_t n = 0;
  for (const auto& s : stages_)
    if (s) n += s->sync->bytes_delivered();
  return n;
}

std::uint64_t PipelineJob::gradient_messages() const {
  std::uint64_t n = 0;
  for (const auto& s : stages_)
    if (s) n += s->sync->messages();
  return n;
}

Time PipelineJob::last_event() const {
  Time t;
  for (const auto& s : stages_)
    if (s) t = std::max(t, s->path().last_event());
  return t;
}

}  // namespace mlsim::cluster
