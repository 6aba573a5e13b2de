#pragma once
// Gradient synchronisation as a strategy (docs/training.md): from "chunk c of layer l's gradient
// may leave worker w" to "the updated parameters of that chunk are back on worker w". The
// gradient path (gradient_path.hpp) calls start() for every chunk its scheduler releases; the
// strategy moves the bytes (through sim_core/collectives) and reports each chunk's progress
// back through SyncEvents.
//
// Adding one: a class implementing GradientSync in its own file (over sim_core/collectives, so
// its bytes cross the scenario's backend with the platform's costs), and one add() line in
// models/training/policies.cpp registering its factory. How the strategies of the other
// training models would plug in:
//   - in-network aggregation (ina: SwitchML, ATP, DSA): entry kPerWorker, each chunk's packets
//     sent to the switch program hosting the aggregator pool; kHolds when the aggregate is back;
//   - ring, tree and RAT all-reduce (all_reduce_sync.hpp, done): one class, the algorithm a
//     registration parameter;
//   - Herald/HET embedding sync (models/embcache/embedding_sync.hpp, done): per worker, the
//     embedding layer's one chunk stands for the rows the worker used; the strategy also pulls
//     each iteration's rows before the forward (SyncEvents::on_fetched).
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "models/training/chunk.hpp"
#include "sim_core/base/error.hpp"
#include "sim_core/base/units.hpp"

namespace mlsim::training {

// Called by a strategy as each chunk progresses. `owner` is the worker for kPerWorker
// strategies, 0 for kAllWorkers ones. `release`: the chunk gives its scheduler credit back;
// `arrived`: its updated parameters are on the owner (kPerWorker) or on every worker.
class SyncEvents {
 public:
  virtual ~SyncEvents() = default;
  virtual void on_chunk(std::size_t owner, const Chunk& chunk, bool release, bool arrived) = 0;
  // A strategy that fetches a layer's parameters before each iteration (an embedding's rows,
  // JobSpec::fetched_each_iteration): the next iteration's parameters are on `worker`.
  virtual void on_fetched(std::size_t /*worker*/, std::uint32_t /*layer*/) {
    MLSIM_CHECK(false, "these sync events take no fetched parameters");
  }
};

class GradientSync {
 public:
  enum class Entry {
    kPerWorker,   // each worker's chunks leave on their own (a PS push needs no other worker);
                  // one scheduler per worker
    kAllWorkers,  // a layer's chunks leave once every worker produced the layer, as one
                  // collective over all workers (Horovod's coordinator); one scheduler per job
  };
  virtual ~GradientSync() = default;
  virtual Entry entry() const = 0;
  // Runs one tensor at a time in the framework's own order (one stream of collectives).
  virtual bool one_tensor_at_a_time() const = 0;
  // The chunks' layout changes with the partition (PS keys are numbered over (layer, chunk));
  // a strategy whose placement depends on it needs no chunk in flight then (a restart).
  virtual bool layout_matters() const = 0;
  virtual void set_partition(std::int64_t partition) = 0;
  virtual void start(std::size_t owner, const Chunk& chunk) = 0;

  // Traffic so far: payload handed to the network, payload delivered, messages.
  virtual std::int64_t bytes_sent() const = 0;
  virtual std::int64_t bytes_delivered() const = 0;
  virtual std::uint64_t messages() const = 0;
  // Holds the job's start until the strategy has what it needs to run (a SwitchML job waits for
  // a free partition of its switch's aggregators, models/ina/ina_fabric.hpp): runs `go` once,
  // now or later from an engine event. Most strategies need nothing: at once.
  virtual void when_ready(std::function<void()> go) { go(); }
  // Transfers that failed (a link down with no route left): what depends on them never happens.
  virtual std::uint64_t failed_transfers() const { return 0; }
  // Retransmission timeouts that fired (in-network aggregation's senders; 0 for strategies
  // whose transport does not retransmit): a stall report's sign of a livelock.
  virtual std::uint64_t timeouts() const { return 0; }

  // Runs once, at the strategy's first failed transfer, so that whoever runs the job learns it
  // cannot finish (and can tear it down) instead of waiting forever. It runs inside the
  // strategy's delivery: the callee must not destroy the strategy from it (defer to an event).
  void set_on_failed(std::function<void()> f) { on_failed_ = std::move(f); }
  bool failed() const { return failed_; }

 protected:
  // For the strategies: a transfer of theirs failed.
  void report_failure() {
    if (failed_) return;
    failed_ = true;
    if (on_failed_) on_failed_();
  }

 private:
  std::function<void()> on_failed_;
  bool failed_ = false;
};

}  // namespace mlsim::training
