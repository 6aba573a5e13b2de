#pragma once
// Herald and HET embedding synchronisation as a gradient-synchronisation strategy of the
// training core (models/training/gradient_sync.hpp; docs/embcache.md). A parameter server (PS)
// holds the embedding tables, every worker keeps an LRU cache of rows, consistency is BSP
// (papers.md section 6, Herald recipe). The job's embedding layer is a fetched layer
// (JobSpec::fetched_each_iteration): each iteration
//   1. (begin_iteration) the global batch (workers x batch_per_worker samples) is split among
//      the workers, and each worker pulls from the PS every row of its samples that it does not
//      hold up to date (a miss, or a row outdated by others' updates); the pull's arrival is the
//      layer's fetch (SyncEvents::on_fetched): the core's compute starts;
//   2. (start) when the core's backward reaches the embedding layer, the worker pushes one
//      gradient row per distinct row it used; the servers' acks give the credit back;
//   3. (synchronise) when every push has arrived, the PS applies them (each updated row's version
//      + 1) and the caches are synchronised. A row updated only by the worker that caches it is
//      refreshed locally (that worker's update is the whole update). Then every worker's layer is
//      up to date (the chunk's arrival) and the next iteration begins.
// Two choices, which the policies preset (and a scenario may set apart, for ablations):
//   - allocation: sequential (HET's loader) or location-aware (Herald, input_allocation.hpp);
//   - sync: eager (after each iteration every worker re-pulls every cached row another worker
//     updated: the recipe's HET baseline, "sync of every updated cached row", so caches never
//     hold outdated rows at the start of an iteration) or on demand (Herald: such rows are only
//     marked outdated and pulled when next used, if still cached).
//   - or bounded (HET as Hetu implements it, PKU-DAIR/Hetu hetu/v1/src/hetu_cache/src/cache.cc
//     CacheBase::_embeddingLookup and _embeddingUpdate, ps-lite PSFhandle_embedding.cc's
//     kSyncEmbedding handler): every cached row carries the server version it was pulled at and
//     its local updates not yet pushed. At lookup a cached row is pulled again only when the
//     server's version is more than `pull_bound` ahead of it; at update a row's gradient is pushed
//     only once it accumulated more than `push_bound` updates (then the server's version and the
//     worker's both grow by that count), and a row evicted with updates pending is pushed with
//     the worker's next push. With both bounds 0 it transmits exactly what on-demand sync does.
// het = sequential + eager; het_bounded = sequential + bounded; herald = location-aware + on
// demand.
// A transmission is one embedding row sent (pull, push or sync refresh), of `row_bytes`.
// Messages are those Hetu's cache and ps-lite send (PKU-DAIR/Hetu hetu/v1, which Herald builds
// on; docs/embcache.md "Messages"): the table is split among `servers` in contiguous row ranges
// (ps-lite AveragePartitioner::partitionDense), and each phase of a worker is one request per
// server holding any of its rows and that server's response (PSAgent::syncEmbedding and
// pushEmbedding: one KVWorker::Request per partition; the worker waits for every response):
//   - pull (CacheBase::_embeddingLookup -> syncEmbedding): the request carries every used row's
//     index and cached version (`row_meta_bytes` each, hit or miss), the response the rows the
//     worker must update with their index and version (row_bytes + row_meta_bytes each);
//   - push (_embeddingUpdate -> pushEmbedding): the request carries the rows' index, update count
//     and gradient (row_bytes + row_meta_bytes each), the response is empty (an ack);
//   - refresh (eager sync only, [inferred] as the HET baseline's "sync of every updated cached
//     row"): as a pull of the rows to refresh.
// Every message is a point-to-point call of the collective layer
// (sim_core/collectives/point_to_point.hpp: launch, protocol and the sender's per-message host
// costs, `messages`, none by default; one host clock per node, so a server's responses leave one
// after another).
//
// Which worker holds which row, and whether up to date, is one directory entry per row (two
// bitmasks over at most 64 workers): Herald's scheduler scores a sample against every worker
// with one lookup per row, and a sync touches each updated row once.
#include <absl/container/flat_hash_map.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "models/embcache/input_allocation.hpp"
#include "models/embcache/lru_cache.hpp"
#include "models/embcache/sample_source.hpp"
#include "models/training/gradient_sync.hpp"
#include "sim_core/base/stats.hpp"
#include "sim_core/collectives/point_to_point.hpp"
#include "sim_core/engine/engine.hpp"
#include "sim_core/run/results.hpp"

namespace mlsim::embcache {

enum class Allocation { kSequential, kLocationAware };
enum class Sync { kEager, kOnDemand, kBounded };

struct EmbeddingSyncParams {
  Allocation allocation = Allocation::kSequential;
  Sync sync = Sync::kEager;
  std::size_t batch_per_worker = 256;
  std::size_t iterations = 100;
  std::int64_t row_bytes = 512;  // embedding dim x 4 bytes
  std::size_t cache_rows = 0;    // per worker
  // The PS servers, each holding a contiguous range of the table's rows (at least one).
  std::vector<NodeId> servers;
  std::vector<NodeId> workers;
  // Per row in a request or response besides its values: ps-lite's row index (size_t) and the
  // version or update count (version_t, int64) of cachetable.h's PSFData<kSyncEmbedding> and
  // <kPushEmbedding>.
  std::int64_t row_meta_bytes = 16;
  std::uint32_t layer = 0;  // the job's embedding layer
  // Sync::kBounded only: staleness bounds in versions (Hetu's pull_bound and push_bound; the
  // Herald README runs HET with --bound 0, which sets both).
  std::int64_t pull_bound = 0, push_bound = 0;
  // Costs of every message (system.costs, system.host): none by default.
  collectives::PointToPoint::Options messages;
};

struct Counters {
  std::uint64_t accesses = 0, hits = 0, misses = 0, outdated_pulls = 0, pushes = 0, refreshes = 0;
  // Rows found outdated in a cache at use under eager sync, which must prevent it.
  std::uint64_t eager_sync_violations = 0;
  std::uint64_t transmissions() const { return misses + outdated_pulls + pushes + refreshes; }
};

class EmbeddingSync final : public training::GradientSync {
 public:
  // `events` (the embedding layer's gradient path) and `links` (for a cost model with several
  // protocols) must outlive the strategy.
  EmbeddingSync(Engine& engine, Network& network, training::SyncEvents& events,
                EmbeddingSyncParams params, std::unique_ptr<SampleSource> source,
                const LinkConditions* links = nullptr);

  Entry entry() const override { return Entry::kPerWorker; }
  bool one_tensor_at_a_time() const override { return false; }
  bool layout_matters() const override { return false; }
  void set_partition(std::int64_t) override {}  // the rows decide the messages, not chunks
  // Worker `worker`'s push of the rows it used this iteration (the embedding layer's chunk).
  void start(std::size_t worker, const training::Chunk& chunk) override;
  std::int64_t bytes_sent() const override { return messages_.bytes_sent(); }
  std::int64_t bytes_delivered() const override { return messages_.bytes_delivered(); }
  std::uint64_t messages() const override { return messages_.calls(); }
  // The server of a row (ps-lite's AveragePartitioner over the table rows).
  std::size_t server_of(Key k) const;

  // The first iteration's batch and pulls: call when the job starts.
  void begin() { begin_iteration(); }
  std::size_t iterations_done() const { return done_; }
  const Counters& counters() const { return counters_; }
  std::uint64_t failed_transfers() const { return messages_.failed_transfers(); }
  std::uint64_t distinct_rows() const { return source_->distinct_rows(); }
  // Embedding metrics (transmissions, hit rate, iteration times, ...) and series.
  void report(Results& out) const;
  // Whether the directory's holder bits match the caches' contents (tests).
  bool directory_matches_caches() const;
  // Tests: runs for every row a pull's response delivers (iteration, worker, row), when that
  // response arrives. The rows enter the cache together once every response arrived, in key
  // order (Hetu's batchedInsert after syncEmbedding), so the number of servers never changes
  // which rows move.
  using Delivered = std::function<void(std::size_t, std::size_t, Key)>;
  void set_on_delivered(Delivered f) { on_delivered_ = std::move(f); }

 private:
  enum class Phase { kPull, kPush, kRefresh };
  // Rows of one worker's phase on one server: in the request, and values in the response.
  struct ShardRows {
    std::int64_t requested = 0, returned = 0;
  };
  // Sends worker w's requests of `phase` to every server with rows in shard_rows_ (then clears
  // it); phase_done(phase, w) runs once every response arrived (at once if there is none).
  void send_phase(Phase phase, std::size_t w);
  void phase_done(Phase phase, std::size_t w);
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
  training::SyncEvents& events_;
  EmbeddingSyncParams params_;
  collectives::PointToPoint messages_;
  std::unique_ptr<SampleSource> source_;
  std::vector<LruCache> caches_;
  struct Holders {
    std::uint64_t cached = 0, fresh = 0;  // fresh is a subset of cached
    // Sync::kBounded: the PS's version of the row (updates applied), counted from when some
    // worker cached it; only differences to the holders' versions matter, so a row nobody
    // caches needs none.
    std::int64_t version = 0;
  };
  absl::flat_hash_map<Key, Holders> directory_;  // rows held by at least one worker
  // This iteration: each worker's distinct rows, the rows it must pull, its pushed chunk, and
  // pending messages.
  std::vector<std::vector<Key>> used_, to_pull_;
  std::vector<training::Chunk> pushed_;
  std::vector<ShardRows> shard_rows_;       // scratch: the phase being sent, by server
  std::vector<std::size_t> outstanding_;    // per worker: responses its phase still waits for
  std::vector<std::uint64_t> shard_start_;  // server s holds table rows [start[s], start[s+1])
  std::size_t pending_ = 0;
  std::size_t done_ = 0;
  Time iteration_start_;
  Counters counters_;
  Delivered on_delivered_;
  LogHistogram iteration_seconds_;  // bounded memory whatever the iteration count
  TimeSeries series_{"iterations", {"iteration_time_s", "transmissions"}, {}};
  std::uint64_t transmissions_before_ = 0;
  // Sync::kBounded: per worker, each cached row's version (the PS's when pulled, plus its own
  // pushed updates) and its updates not pushed yet; rows evicted with updates pending (pushed
  // next); this iteration's pushed rows and their update counts.
  struct RowVersion {
    std::int64_t version = 0, updates = 0;
  };
  std::vector<absl::flat_hash_map<Key, RowVersion>> versions_;
  std::vector<std::vector<std::pair<Key, std::int64_t>>> evicted_, push_rows_;
  void bounded_push(std::size_t w);
  void bounded_synchronise();
};

}  // namespace mlsim::embcache
