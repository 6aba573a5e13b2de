#pragma once
// Data-parallel training of an embedding model with a parameter server (PS) holding the tables
// and an LRU embedding cache on every GPU worker, BSP consistency (papers.md section 6, Herald
// recipe). One iteration, on the engine and network:
//   1. the global batch (workers x batch_per_worker samples) is split among the workers;
//   2. each worker pulls from the PS, in one transfer, every row of its samples that it does not
//      hold up to date (a miss, or a row outdated by others' updates), then computes, then pushes
//      one gradient row per distinct row it used (one transfer);
//   3. when every push has arrived, the PS applies them (each updated row's version + 1) and the
//      caches are synchronised. A row updated only by the worker that caches it is refreshed
//      locally (that worker's update is the whole update).
// Two choices, which the policies preset (and a scenario may set apart, for ablations):
//   - allocation: sequential (HET's loader) or location-aware (Herald, input_allocation.hpp);
//   - sync: eager (after each iteration every worker re-pulls every cached row another worker
//     updated: the recipe's HET baseline, "sync of every updated cached row", so caches never
//     hold outdated rows at the start of an iteration) or on demand (Herald: such rows are only
//     marked outdated and pulled when next used, if still cached).
// het = sequential + eager; herald = location-aware + on demand.
// A transmission is one embedding row sent (pull, push or sync refresh), of `row_bytes`. Each
// worker's pull, push and refresh of an iteration is one point-to-point message through the
// collective layer (sim_core/collectives/point_to_point.hpp: a send_recv call paying the
// layer's launch, protocol and host costs, `messages`, none by default).
//
// Which worker holds which row, and whether up to date, is one directory entry per row (two
// bitmasks over at most 64 workers): Herald's scheduler scores a sample against every worker
// with one lookup per row, and a sync touches each updated row once.
#include <absl/container/flat_hash_map.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "models/embcache/input_allocation.hpp"
#include "models/embcache/lru_cache.hpp"
#include "models/embcache/sample_source.hpp"
#include "sim_core/base/stats.hpp"
#include "sim_core/collectives/point_to_point.hpp"
#include "sim_core/engine/engine.hpp"
#include "sim_core/hardware/compute.hpp"
#include "sim_core/network/network.hpp"
#include "sim_core/run/results.hpp"

namespace mlsim::embcache {

enum class Allocation { kSequential, kLocationAware };
enum class Sync { kEager, kOnDemand };

struct TrainingParams {
  Allocation allocation = Allocation::kSequential;
  Sync sync = Sync::kEager;
  std::size_t batch_per_worker = 256;
  std::size_t iterations = 100;
  std::int64_t row_bytes = 512;  // embedding dim x 4 bytes
  std::size_t cache_rows = 0;    // per worker
  Time compute_per_sample;       // dense forward + backward on the GPU (run on Compute)
  NodeId server = 0;
  std::vector<NodeId> workers;
  // Costs of every message (system.costs, system.host): none by default.
  collectives::PointToPoint::Options messages;
};

struct Counters {
  std::uint64_t accesses = 0, hits = 0, misses = 0, outdated_pulls = 0, pushes = 0, refreshes = 0;
  // Rows found outdated in a cache at use under eager sync, which must prevent it.
  std::uint64_t eager_sync_violations = 0;
  std::uint64_t transmissions() const { return misses + outdated_pulls + pushes + refreshes; }
};

class EmbeddingTraining {
 public:
  // A worker's dense compute runs on `compute` (fixed work per sample, divided by the host's
  // speed). `links` (for a cost model with several protocols) must outlive the job.
  EmbeddingTraining(Engine& engine, Network& network, Compute& compute, TrainingParams params,
                    std::unique_ptr<SampleSource> source, const LinkConditions* links = nullptr);
  void start();
  bool finished() const { return done_ == params_.iterations; }
  double progress() const {
    return static_cast<double>(done_) / static_cast<double>(params_.iterations);
  }
  const Counters& counters() const { return counters_; }
  void report(Results& out) const;
  // Whether the directory's holder bits match the caches' contents (tests).
  bool directory_matches_caches() const;

 private:
  void begin_iteration();
  void worker_pulled(std::size_t w);
  void worker_pushed();
  void synchronise();
  void end_iteration();
  std::uint64_t fresh_mask(Key k) const {
    auto it = directory_.find(k);
    return it == directory_.end() ? 0 : it->second.fresh;
  }
  void hold(std::size_t w, Key k);  // worker w now holds k up to date (after a pull)

  Engine& engine_;
  Compute& compute_;
  TrainingParams params_;
  collectives::PointToPoint messages_;
  std::unique_ptr<SampleSource> source_;
  std::vector<LruCache> caches_;
  struct Holders {
    std::uint64_t cached = 0, fresh = 0;  // fresh is a subset of cached
  };
  absl::flat_hash_map<Key, Holders> directory_;  // rows held by at least one worker
  // This iteration: each worker's distinct rows, the rows it must pull, and pending transfers.
  std::vector<std::vector<Key>> used_, to_pull_;
  std::vector<std::size_t> samples_of_;
  std::size_t pending_ = 0;
  std::size_t done_ = 0;
  Time iteration_start_;
  Counters counters_;
  LogHistogram iteration_seconds_;  // bounded memory whatever the iteration count
  TimeSeries series_{"iterations", {"iteration_time_s", "transmissions"}, {}};
  std::uint64_t transmissions_before_ = 0;
};

}  // namespace mlsim::embcache
