#include "models/embcache/embedding_training.hpp"

#include "models/training/policies.hpp"
#include "sim_core/base/error.hpp"

namespace mlsim::embcache {
namespace {

constexpr std::size_t kEmbedding = 0, kDense = 1;

training::JobSpec job_spec(const TrainingParams& p, std::uint64_t distinct_rows) {
  training::JobSpec spec;
  // The embedding layer's values: every row of the tables (its gradient is sparse: the strategy
  // sends the rows used, not this count).
  spec.parameters = {static_cast<std::int64_t>(distinct_rows) * (p.row_bytes / 4),
                     p.dense_parameters};
  spec.workers = p.workers;
  spec.iterations = p.iterations;
  spec.fetched_each_iteration = {true, false};
  const std::int64_t compute =
      p.compute_per_sample.count_ns() * static_cast<std::int64_t>(p.batch_per_worker);
  const Time forward = Time::ns(compute / 3), backward = Time::ns(compute - compute / 3);
  spec.times.assign(p.workers.size(), {training::LayerTimes{Time::zero(), Time::zero()},
                                       training::LayerTimes{forward, backward}});
  return spec;
}

training::SchedulerFactory fifo() {
  return training::training_policies().schedulers.get("fifo", "system").value;
}

}  // namespace

EmbeddingTraining::EmbeddingTraining(Engine& engine, Network& network, Compute& compute,
                                     TrainingParams params, std::unique_ptr<SampleSource> source,
                                     const LinkConditions* links)
    : engine_(engine),
      params_(std::move(params)),
      job_(engine, compute, job_spec(params_, source->distinct_rows())),
      embedding_path_(engine, job_, fifo(), {}),
      dense_path_(engine, job_, fifo(), {}),
      router_({&embedding_path_, &dense_path_}) {
  EmbeddingSyncParams e = params_;
  e.layer = kEmbedding;
  embedding_ = std::make_unique<EmbeddingSync>(engine, network, embedding_path_, std::move(e),
                                               std::move(source), links);
  training::SyncOptions o;
  o.workers = params_.workers;
  o.servers = {params_.servers.front()};  // the dense ps strategy runs on the first server
  o.layer_parameters = job_.spec().parameters;
  o.host = params_.messages.host;
  o.links = links;  // a "rat" dense sync plans over them
  dense_ = training::training_policies()
               .syncs.get(params_.dense_sync, "system.dense_sync")
               .value(training::SyncSetup{engine, network, dense_path_, std::move(o)});
  embedding_path_.set_sync(embedding_.get());
  dense_path_.set_sync(dense_.get());
  job_.set_gradient_sink(&router_);
  static_assert(kDense == 1);
}

void EmbeddingTraining::start() {
  embedding_->begin();  // the first iteration's rows are pulled before any compute
  job_.start();
}

void EmbeddingTraining::report(Results& out) const {
  const double iters = static_cast<double>(embedding_->iterations_done());
  const double samples =
      iters * static_cast<double>(params_.batch_per_worker * params_.workers.size());
  const double t = engine_.now().seconds();
  out.set_metric("completed", finished() ? 1 : 0);
  out.set_metric("iterations", iters);
  out.set_metric("time_s", t);
  out.set_metric("throughput_samples_per_s", t > 0 ? samples / t : 0);
  embedding_->report(out);
  if (params_.dense_parameters > 0) {
    out.set_metric("dense_bytes", static_cast<double>(dense_->bytes_delivered()));
    out.details()["dense_sync"] = params_.dense_sync;
  }
}

}  // namespace mlsim::embcache
