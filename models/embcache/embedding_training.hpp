#pragma once
// Data-parallel training of an embedding (recommendation) model on the training core
// (models/training, docs/training.md; docs/embcache.md): a DataParallelJob of two layers per
// worker,
//   layer 0, the embedding: fetched every iteration and synchronised by Herald or HET
//            (EmbeddingSync, embedding_sync.hpp: pulls, pushes, the PS and the caches); its
//            lookups take no GPU time [assumed: a gather, small beside the dense part];
//   layer 1, the dense part: `compute_per_sample` x batch_per_worker on the platform's Compute
//            (a third forward, two thirds backward [assumed: backward twice the forward]), its
//            `dense_parameters` gradient synchronised by the core's ps (on the embedding PS host)
//            or ring strategy (none when 0, the default: identical in both policies).
// Each layer has its own gradient path (FIFO scheduler) and the job's gradients reach them
// through a LayerRouter. The iteration barrier is BSP through the embedding strategy: the next
// iteration's rows are pulled once every push arrived and the caches were synchronised.
#include <memory>
#include <string>
#include <vector>

#include "models/embcache/embedding_sync.hpp"
#include "models/training/data_parallel_job.hpp"
#include "models/training/gradient_path.hpp"
#include "models/training/layer_router.hpp"
#include "sim_core/hardware/compute.hpp"
#include "sim_core/network/network.hpp"
#include "sim_core/run/results.hpp"

namespace mlsim::embcache {

// The embedding strategy's parameters (its `layer` is set by the job) and the job's own.
struct TrainingParams : EmbeddingSyncParams {
  Time compute_per_sample;  // dense forward + backward on the GPU (run on Compute)
  // The dense layer's gradient values (0: not synchronised) and its strategy in the training
  // core's registry ("ps" or "ring"); its messages pay `messages`' host costs.
  std::int64_t dense_parameters = 0;
  std::string dense_sync = "ring";
};

class EmbeddingTraining {
 public:
  // `compute`, `network` and `links` (for a cost model with several protocols) must outlive the
  // job.
  EmbeddingTraining(Engine& engine, Network& network, Compute& compute, TrainingParams params,
                    std::unique_ptr<SampleSource> source, const LinkConditions* links = nullptr);
  void start();
  bool finished() const { return job_.finished(); }
  double progress() const { return job_.progress(); }
  const Counters& counters() const { return embedding_->counters(); }
  void report(Results& out) const;
  // Whether the directory's holder bits match the caches' contents (tests).
  bool directory_matches_caches() const { return embedding_->directory_matches_caches(); }
  // Tests: the embedding layer's messages so far, and an observer of the rows pulls deliver.
  std::uint64_t embedding_messages() const { return embedding_->messages(); }
  void set_on_delivered(EmbeddingSync::Delivered f) { embedding_->set_on_delivered(std::move(f)); }
  // The dense layer's synchronisation traffic (payload bytes delivered).
  std::int64_t dense_bytes_delivered() const { return dense_->bytes_delivered(); }

 private:
  Engine& engine_;
  TrainingParams params_;
  training::DataParallelJob job_;
  training::GradientPath embedding_path_, dense_path_;
  training::LayerRouter router_;
  std::unique_ptr<EmbeddingSync> embedding_;
  std::unique_ptr<training::GradientSync> dense_;
};

}  // namespace mlsim::embcache
