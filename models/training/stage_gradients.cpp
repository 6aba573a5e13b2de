#include "models/training/stage_gradients.hpp"

#include <algorithm>

#include "sim_core/base/error.hpp"

namespace mlsim::training {

// The replicas of stage s in one group (the core's workers first, first + stride, ... : replicas
// of them) and its layers, as one GradientOwner whose gradient path and strategy synchronise
// them: layer by layer, or (one tensor) the stage's layers with parameters as the path's one
// layer 0.
class StageGradients::Stage final : public GradientOwner {
 public:
  Stage(Engine& engine, DataParallelJob& core, std::size_t first_worker, std::size_t stride,
        std::size_t replicas, std::size_t first_layer, std::size_t end_layer, const Setup& setup)
      : core_(core),
        first_worker_(first_worker),
        stride_(stride),
        replicas_(replicas),
        first_layer_(first_layer),
        end_layer_(end_layer),
        one_tensor_(setup.stage_as_one_tensor),
        path_(engine, *this, setup.make_scheduler, setup.config) {
    for (std::size_t l = first_layer; l < end_layer; ++l) {
      const std::int64_t p = core.spec().parameters[l];
      total_ += p;
      if (p != 0) ++sent_layers_;
    }
    handed_.assign(replicas, 0);
  }

  std::size_t gradient_workers() const override { return replicas_; }
  std::size_t gradient_layers() const override {
    return one_tensor_ ? 1 : end_layer_ - first_layer_;
  }
  std::int64_t layer_parameters(std::size_t l) const override {
    return one_tensor_ ? total_ : core_.spec().parameters[first_layer_ + l];
  }
  void parameters_back(std::size_t w, std::size_t l) override {
    if (!one_tensor_) {
      core_.parameters_back(worker(w), first_layer_ + l);
      return;
    }
    for (std::size_t layer = first_layer_; layer < end_layer_; ++layer)
      if (core_.spec().parameters[layer] != 0) core_.parameters_back(worker(w), layer);
  }
  // Replica w's gradient of the stage's layer l (from the stage's first) is ready: handed to
  // the path at once, or, as one tensor, once w handed over every layer with parameters.
  void gradient_ready(std::size_t w, std::size_t l) {
    if (!one_tensor_) {
      path_.gradient_ready(w, l);
      return;
    }
    if (++handed_[w] < sent_layers_) return;
    handed_[w] = 0;
    path_.gradient_ready(w, 0);
  }
  void parameters_fetched(std::size_t, std::size_t) override {
    MLSIM_CHECK(false, "a pipeline stage fetches no layer");
  }
  void check_progress() override { core_.check_progress(); }
  std::size_t updates(std::size_t w, std::size_t l) const override {
    if (!one_tensor_) return core_.updates(worker(w), first_layer_ + l);
    for (std::size_t layer = first_layer_; layer < end_layer_; ++layer)
      if (core_.spec().parameters[layer] != 0) return core_.updates(worker(w), layer);
    return 0;
  }

  std::size_t worker(std::size_t replica) const { return first_worker_ + replica * stride_; }
  std::size_t first_layer() const { return first_layer_; }
  GradientPath& path() { return path_; }
  const GradientPath& path() const { return path_; }
  std::unique_ptr<GradientSync> sync;

 private:
  DataParallelJob& core_;
  std::size_t first_worker_, stride_, replicas_, first_layer_, end_layer_;
  bool one_tensor_;
  std::int64_t total_ = 0;           // the stage's parameters
  std::size_t sent_layers_ = 0;      // its layers with parameters
  std::vector<std::size_t> handed_;  // per replica: layers handed over since its last tensor
  GradientPath path_;
};

StageGradients::StageGradients(Engine& engine, Network& network, DataParallelJob& core,
                               const PipelineSchedule& schedule, const Setup& setup,
                               std::function<void()> on_failed)
    : core_(core), schedule_(schedule) {
  const std::vector<NodeId>& hosts = core.spec().workers;
  const std::vector<std::int64_t>& parameters = core.spec().parameters;
  groups_ = setup.replica_groups;
  MLSIM_CHECK(groups_ >= 1, "a stage's replicas form at least one group");
  for (std::size_t s = 0; s < schedule.stages(); ++s) {
    MLSIM_CHECK(schedule.replication(s) % groups_ == 0,
                "a stage's replicas split evenly into its replica groups");
    const std::size_t replicas = schedule.replication(s) / groups_;
    for (std::size_t g = 0; g < groups_; ++g) {
      if (replicas < 2) {
        stages_.push_back(nullptr);
        continue;
      }
      const std::size_t first = schedule.first_worker(s) + g;
      const PipelineSchedule::Worker& wk = schedule.worker(first);
      auto stage = std::make_unique<Stage>(engine, core, first, groups_, replicas, wk.first_layer,
                                           wk.end_layer, setup);
      const auto at = [](const auto& v, std::size_t i) {
        return v.begin() + static_cast<std::ptrdiff_t>(i);
      };
      std::vector<NodeId> workers;
      for (std::size_t r = 0; r < replicas; ++r) workers.push_back(hosts[stage->worker(r)]);
      const bool one_host =
          setup.make_one_host_sync &&
          std::all_of(workers.begin(), workers.end(), [&](NodeId h) { return h == workers[0]; });
      SyncOptions o = one_host ? setup.one_host_sync : setup.sync;
      o.workers = std::move(workers);
      if (!setup.stage_host_link_sharers.empty())
        o.host_link_sharers = setup.stage_host_link_sharers.at(s * groups_ + g);
      o.servers = o.workers;  // colocated parameter servers (ps only), as a data-parallel job's
      if (!setup.stage_flow_labels.empty())
        o.flow_label = setup.stage_flow_labels.at(s * groups_ + g);
      if (setup.stage_as_one_tensor)
        o.layer_parameters.assign(1, stage->layer_parameters(0));
      else
        o.layer_parameters.assign(at(parameters, wk.first_layer), at(parameters, wk.end_layer));
      stage->sync = (one_host ? setup.make_one_host_sync
                              : setup.make_sync)(SyncSetup{engine, network, stage->path(), o});
      stage->path().set_sync(stage->sync.get());
      stage->sync->set_on_failed(on_failed);
      stages_.push_back(std::move(stage));
    }
  }
}

StageGradients::~StageGradients() = default;

void StageGradients::gradient_ready(std::size_t w, std::size_t layer) {
  const std::size_t s = schedule_.worker(w).stage;
  const std::size_t i = w - schedule_.first_worker(s);  // the replica in its stage
  const auto& stage = stages_[s * groups_ + i % groups_];
  if (!stage) {
    core_.parameters_back(w, layer);  // one replica: the update is local, nothing to send
    return;
  }
  stage->gradient_ready(i / groups_, layer - stage->first_layer());
}

std::int64_t StageGradients::bytes_sent() const {
  std::int64_t n = 0;
  for (const auto& s : stages_)
    if (s) n += s->sync->bytes_sent();
  return n;
}

std::int64_t StageGradients::bytes_delivered() const {
  std::int64_t n = 0;
  for (const auto& s : stages_)
    if (s) n += s->sync->bytes_delivered();
  return n;
}

std::uint64_t StageGradients::messages() const {
  std::uint64_t n = 0;
  for (const auto& s : stages_)
    if (s) n += s->sync->messages();
  return n;
}

Time StageGradients::last_event() const {
  Time t;
  for (const auto& s : stages_)
    if (s) t = std::max(t, s->path().last_event());
  return t;
}

}  // namespace mlsim::training
