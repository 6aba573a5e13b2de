#include "models/embcache/embedding_sync.hpp"

#include <algorithm>
#include <utility>

#include "sim_core/base/error.hpp"

namespace mlsim::embcache {

EmbeddingSync::EmbeddingSync(Engine& engine, Network& network, training::SyncEvents& events,
                             EmbeddingSyncParams params, std::unique_ptr<SampleSource> source,
                             const LinkConditions* links)
    : engine_(engine),
      events_(events),
      params_(std::move(params)),
      messages_(engine, network, params_.messages, links),
      source_(std::move(source)),
      caches_(params_.workers.size(), LruCache(params_.cache_rows)),
      used_(params_.workers.size()),
      to_pull_(params_.workers.size()),
      pushed_(params_.workers.size()),
      shard_rows_(params_.servers.size()),
      outstanding_(params_.workers.size(), 0),
      versions_(params_.sync == Sync::kBounded ? params_.workers.size() : 0),
      evicted_(versions_.size()),
      push_rows_(versions_.size()) {
  MLSIM_CHECK(!params_.workers.empty() && params_.workers.size() <= 64 && params_.iterations > 0 &&
                  params_.batch_per_worker > 0 && !params_.servers.empty(),
              "embedding training needs 1 to 64 workers, a server, iterations and samples");
  // ps-lite's AveragePartitioner::partitionDense: server s holds len / S rows, plus one for the
  // first len mod S servers, in order.
  const std::uint64_t rows = source_->distinct_rows(), servers = params_.servers.size();
  shard_start_.push_back(0);
  for (std::uint64_t s = 0; s < servers; ++s)
    shard_start_.push_back(shard_start_.back() + rows / servers + (s < rows % servers ? 1 : 0));
  // A push or pull that finds no route never completes: report the job failed at the first one
  // (GradientSync::set_on_failed), as the collective-based strategies do.
  messages_.set_failure_callback([this] { report_failure(); });
}

void EmbeddingSync::hold(std::size_t w, Key k) {
  const std::uint64_t bit = std::uint64_t{1} << w;
  Holders& h = directory_[k];
  h.cached |= bit;
  h.fresh |= bit;
  // A pull brings the PS's version; updates not pushed yet stay (Hetu adds them back).
  if (!versions_.empty()) versions_[w][k].version = h.version;
  if (const auto evicted = caches_[w].put(k)) {
    if (!versions_.empty()) {
      auto node = versions_[w].extract(*evicted);
      if (node.mapped().updates != 0) evicted_[w].emplace_back(*evicted, node.mapped().updates);
    }
    auto it = directory_.find(*evicted);
    it->second.cached &= ~bit;
    it->second.fresh &= ~bit;
    if (it->second.cached == 0) directory_.erase(it);
  }
}

std::size_t EmbeddingSync::server_of(Key k) const {
  if (shard_start_.size() == 2) return 0;
  const std::uint64_t row = source_->table_row(k);
  // The last range also takes rows past the table's end (a source's default table_row).
  const auto it = std::upper_bound(shard_start_.begin() + 1, shard_start_.end() - 1, row);
  return static_cast<std::size_t>(it - (shard_start_.begin() + 1));
}

void EmbeddingSync::send_phase(Phase phase, std::size_t w) {
  // Bytes per row in the request and per row in the response (Hetu's messages, header comment).
  const std::int64_t meta = params_.row_meta_bytes, row = params_.row_bytes;
  const std::int64_t request = phase == Phase::kPush ? row + meta : meta;
  const std::int64_t response = phase == Phase::kPush ? 0 : row + meta;
  outstanding_[w] = 0;
  for (std::size_t s = 0; s < shard_rows_.size(); ++s) {
    const ShardRows r = std::exchange(shard_rows_[s], ShardRows{});
    if (r.requested == 0) continue;  // ps-lite sends nothing to a server without rows
    ++outstanding_[w];
    const Bytes back{r.returned * response};
    messages_.send(params_.workers[w], params_.servers[s], Bytes{r.requested * request},
                   [this, phase, w, s, back](const collectives::CollectiveResult&) {
                     messages_.send(params_.servers[s], params_.workers[w], back,
                                    [this, phase, w, s](const collectives::CollectiveResult&) {
                                      if (phase == Phase::kPull && on_delivered_) {
                                        for (Key k : to_pull_[w])
                                          if (server_of(k) == s) on_delivered_(done_, w, k);
                                      }
                                      if (--outstanding_[w] == 0) phase_done(phase, w);
                                    });
                   });
  }
  // No row on any server: the phase is over without a message (Hetu's syncEmbedding and
  // pushEmbedding return at once on an empty list), at this instant.
  if (outstanding_[w] == 0)
    engine_.schedule_in(Time::zero(), [this, phase, w] { phase_done(phase, w); });
}

void EmbeddingSync::phase_done(Phase phase, std::size_t w) {
  switch (phase) {
    case Phase::kPull:
      return worker_pulled(w);
    case Phase::kPush:
      events_.on_chunk(w, pushed_[w], true, false);  // its credit back
      return worker_pushed();
    case Phase::kRefresh:
      if (--pending_ == 0) end_iteration();
      return;
  }
}

bool EmbeddingSync::directory_matches_caches() const {
  std::size_t bits = 0;
  for (const auto& [k, h] : directory_) {
    if ((h.fresh & ~h.cached) != 0 || h.cached == 0) return false;
    bits += static_cast<std::size_t>(__builtin_popcountll(h.cached));
  }
  std::size_t held = 0;
  bool ok = true;
  for (std::size_t w = 0; w < caches_.size(); ++w) {
    held += caches_[w].size();
    caches_[w].for_each([&](Key k) {
      auto it = directory_.find(k);
      if (it == directory_.end() || !((it->second.cached >> w) & 1)) ok = false;
    });
  }
  return ok && held == bits;
}

void EmbeddingSync::begin_iteration() {
  iteration_start_ = engine_.now();
  const std::size_t n = params_.workers.size();
  std::vector<Sample> batch;
  batch.reserve(n * params_.batch_per_worker);
  for (std::size_t j = 0; j < n * params_.batch_per_worker; ++j) batch.push_back(source_->next());
  const std::vector<std::vector<std::size_t>> alloc =
      params_.allocation == Allocation::kSequential
          ? sequential_allocation(batch.size(), n)
          : location_aware_allocation(batch, n, done_, [this](Key k) { return fresh_mask(k); });
  for (std::size_t w = 0; w < n; ++w) {
    // The core computes batch_per_worker samples on every worker: both allocations fill every
    // worker exactly (sequential by construction, LAIA places n b samples with a cap of b).
    MLSIM_CHECK(alloc[w].size() == params_.batch_per_worker,
                "an allocation left a worker with another number of samples than its batch");
    used_[w].clear();
    for (std::size_t j : alloc[w])
      used_[w].insert(used_[w].end(), batch[j].begin(), batch[j].end());
    std::sort(used_[w].begin(), used_[w].end());  // distinct rows, in a deterministic order
    used_[w].erase(std::unique(used_[w].begin(), used_[w].end()), used_[w].end());
    to_pull_[w].clear();
    const std::uint64_t bit = std::uint64_t{1} << w;
    for (Key k : used_[w]) {
      ++counters_.accesses;
      // Every used row goes in the request with its version, hit or miss (_embeddingLookup).
      ShardRows& on = shard_rows_[server_of(k)];
      ++on.requested;
      auto it = directory_.find(k);
      const Holders h = it == directory_.end() ? Holders{} : it->second;
      if (!(h.cached & bit)) {
        ++counters_.misses;
        to_pull_[w].push_back(k);
        ++on.returned;
      } else if (!(h.fresh & bit)) {
        ++counters_.outdated_pulls;
        if (params_.sync == Sync::kEager) ++counters_.eager_sync_violations;
        to_pull_[w].push_back(k);
        ++on.returned;
      } else {
        ++counters_.hits;
        caches_[w].put(k);  // a use: most recent
      }
    }
    // A failed message never completes: the iteration stalls (counted in failed_transfers;
    // reported through set_on_failed).
    send_phase(Phase::kPull, w);
  }
  pending_ = n;  // pushes to come
}

void EmbeddingSync::worker_pulled(std::size_t w) {
  for (Key k : to_pull_[w]) hold(w, k);
  events_.on_fetched(w, params_.layer);  // the core computes the worker's samples
}

void EmbeddingSync::start(std::size_t w, const training::Chunk& chunk) {
  MLSIM_CHECK(chunk.layer == params_.layer, "the embedding strategy got another layer's gradient");
  pushed_[w] = chunk;
  auto push = [&](Key k) {
    ++counters_.pushes;
    ++shard_rows_[server_of(k)].requested;
  };
  if (params_.sync == Sync::kBounded) {
    bounded_push(w);
    for (const auto& [k, updates] : push_rows_[w]) push(k);
  } else {
    for (Key k : used_[w]) push(k);
  }
  send_phase(Phase::kPush, w);
}

void EmbeddingSync::worker_pushed() {
  if (--pending_ == 0) synchronise();
}

// Hetu's CacheBase::_embeddingUpdate: every used row accumulates one update; a row with more
// than push_bound updates is pushed (its version grows by them); rows evicted with updates
// pending go along. A used row already evicted again is pushed at once (Hetu pushes a row it
// finds without data).
void EmbeddingSync::bounded_push(std::size_t w) {
  auto& out = push_rows_[w];
  out.clear();
  for (Key k : used_[w]) {
    auto it = versions_[w].find(k);
    if (it == versions_[w].end()) {
      out.emplace_back(k, 1);
      continue;
    }
    RowVersion& v = it->second;
    if (++v.updates > params_.push_bound) {
      out.emplace_back(k, v.updates);
      v.version += v.updates;
      v.updates = 0;
    }
  }
  out.insert(out.end(), evicted_[w].begin(), evicted_[w].end());
  evicted_[w].clear();
}

// The PS applies the pushed updates (its version of each row grows by them, ps-lite's
// kPushEmbedding handler); a holder's copy stays usable while the PS is at most pull_bound
// versions ahead of it (kSyncEmbedding's test). Nothing is re-pulled here: an outdated copy is
// pulled at its next lookup (begin_iteration).
void EmbeddingSync::bounded_synchronise() {
  std::vector<Key> changed;
  for (std::size_t w = 0; w < push_rows_.size(); ++w)
    for (const auto& [k, updates] : push_rows_[w]) {
      auto it = directory_.find(k);
      if (it == directory_.end()) continue;  // cached nowhere: no copy to compare with
      it->second.version += updates;
      changed.push_back(k);
    }
  std::sort(changed.begin(), changed.end());
  changed.erase(std::unique(changed.begin(), changed.end()), changed.end());
  for (Key k : changed) {
    Holders& h = directory_.find(k)->second;
    h.fresh = 0;
    for (std::uint64_t m = h.cached; m != 0; m &= m - 1) {
      const auto w = static_cast<std::size_t>(__builtin_ctzll(m));
      if (h.version - versions_[w].at(k).version <= params_.pull_bound)
        h.fresh |= std::uint64_t{1} << w;
    }
  }
  pending_ = 0;
  end_iteration();
}

void EmbeddingSync::synchronise() {
  if (params_.sync == Sync::kBounded) return bounded_synchronise();
  // The PS applies every pushed gradient. Who updated each row: one worker index, or `many`.
  const std::size_t n = params_.workers.size(), many = n;
  // Only sums and per-row updates depend on it, never the map's iteration order.
  absl::flat_hash_map<Key, std::size_t> updater;
  for (std::size_t w = 0; w < n; ++w)
    for (Key k : used_[w]) {
      auto [it, first] = updater.try_emplace(k, w);
      if (!first && it->second != w) it->second = many;
    }
  // A holder that alone updated a row applied the whole update itself; every other holder's copy
  // is now outdated: re-pulled at once (eager) or left marked (on demand).
  // Eager: rows each worker re-pulls, by server (worker-major).
  const std::size_t servers = params_.servers.size();
  std::vector<std::int64_t> refresh_rows(params_.sync == Sync::kEager ? n * servers : 0, 0);
  for (const auto& [k, who] : updater) {
    auto it = directory_.find(k);
    if (it == directory_.end()) continue;
    Holders& h = it->second;
    const std::uint64_t own = who == many ? 0 : (h.cached & (std::uint64_t{1} << who));
    const std::uint64_t others = h.cached & ~own;
    if (params_.sync == Sync::kEager) {
      const std::size_t s = server_of(k);
      for (std::uint64_t m = others; m != 0; m &= m - 1)
        ++refresh_rows[static_cast<std::size_t>(__builtin_ctzll(m)) * servers + s];
      h.fresh = h.cached;
    } else {
      h.fresh = own;
    }
  }
  // Count the workers that refresh first: a phase may complete only after every one is sent.
  std::vector<std::size_t> refreshing;
  if (!refresh_rows.empty())
    for (std::size_t w = 0; w < n; ++w) {
      const auto first = refresh_rows.begin() + static_cast<std::ptrdiff_t>(w * servers);
      if (std::any_of(first, first + static_cast<std::ptrdiff_t>(servers),
                      [](std::int64_t r) { return r != 0; }))
        refreshing.push_back(w);
    }
  pending_ = refreshing.size();
  for (std::size_t w : refreshing) {
    for (std::size_t s = 0; s < servers; ++s) {
      const std::int64_t rows = refresh_rows[w * servers + s];
      counters_.refreshes += static_cast<std::uint64_t>(rows);
      shard_rows_[s] = {rows, rows};
    }
    send_phase(Phase::kRefresh, w);
  }
  if (pending_ == 0) end_iteration();
}

void EmbeddingSync::end_iteration() {
  iteration_seconds_.add((engine_.now() - iteration_start_).seconds());
  const std::uint64_t t = counters_.transmissions();
  series_.add(engine_.now(), {(engine_.now() - iteration_start_).seconds(),
                              static_cast<double>(t - transmissions_before_)});
  transmissions_before_ = t;
  ++done_;
  // Every worker's embedding layer is up to date (BSP): its chunk is back.
  for (std::size_t w = 0; w < params_.workers.size(); ++w)
    events_.on_chunk(w, pushed_[w], false, true);
  if (done_ < params_.iterations) begin_iteration();
}

void EmbeddingSync::report(Results& out) const {
  const double iters = static_cast<double>(done_);
  out.set_summary("iteration_time", iteration_seconds_.summary(), "_s");
  const Counters& c = counters_;
  const double per = iters > 0 ? 1 / iters : 0;
  out.set_metric("transmissions_per_iteration", static_cast<double>(c.transmissions()) * per);
  out.set_metric("pulls_per_iteration", static_cast<double>(c.misses + c.outdated_pulls) * per);
  out.set_metric("pushes_per_iteration", static_cast<double>(c.pushes) * per);
  out.set_metric("refreshes_per_iteration", static_cast<double>(c.refreshes) * per);
  out.set_metric("hit_rate",
                 c.accesses ? static_cast<double>(c.hits) / static_cast<double>(c.accesses) : 0);
  out.set_metric("embedding_bytes",
                 static_cast<double>(c.transmissions()) * static_cast<double>(params_.row_bytes));
  out.set_metric("eager_sync_violations", static_cast<double>(c.eager_sync_violations));
  out.set_metric("failed_transfers", static_cast<double>(messages_.failed_transfers()));
  out.set_metric("messages_per_iteration", static_cast<double>(messages_.calls()) * per);
  // Rows with their index and version, requests included (embedding_bytes counts rows only).
  out.set_metric("message_bytes_per_iteration",
                 static_cast<double>(messages_.bytes_delivered()) * per);
  out.details()["allocation"] =
      params_.allocation == Allocation::kSequential ? "sequential" : "location_aware";
  out.details()["sync"] = params_.sync == Sync::kEager      ? "eager"
                          : params_.sync == Sync::kOnDemand ? "on_demand"
                                                            : "bounded";
  if (params_.sync == Sync::kBounded) {
    out.details()["pull_bound"] = params_.pull_bound;
    out.details()["push_bound"] = params_.push_bound;
  }
  out.details()["cache_rows_per_worker"] = params_.cache_rows;
  out.details()["servers"] = params_.servers.size();
  out.details()["distinct_rows"] = source_->distinct_rows();
  out.add_series(series_);
}

}  // namespace mlsim::embcache
