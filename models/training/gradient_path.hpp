#pragma once
// The communication-scheduling layer between the core's "gradient of layer l ready on worker w"
// and the synchronisation strategy (docs/training.md). It cuts each ready gradient into chunks
// of the scheduler's partition, queues them in the scheduler (one per worker for a kPerWorker
// strategy unless set_ordering says otherwise, one for the job for a kAllWorkers one, whose
// layer is ready once every worker produced it), starts every chunk the scheduler releases (on
// every worker under Ordering::kJob), and, as the strategy reports chunks back, returns their
// credit and tells the core when a layer's parameters are back.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "models/training/comm_scheduler.hpp"
#include "models/training/data_parallel_job.hpp"
#include "models/training/gradient_sync.hpp"

namespace mlsim::training {

// kComplete: the chunk gave its credit back.
struct ChunkEvent {
  enum class Kind { kStart, kComplete } kind = Kind::kStart;
  Time at;
  std::size_t worker = 0;  // the scheduler's owner: 0 for a kAllWorkers strategy
  std::size_t iteration = 0;
  Chunk chunk;
  std::int64_t credit_left = 0;  // after the event
};

using SchedulerFactory = std::function<std::unique_ptr<CommScheduler>(const SchedulerSetup&)>;

class GradientPath final : public GradientSink, public SyncEvents {
 public:
  // `job` (a DataParallelJob, or another GradientOwner) and `engine` must outlive the path;
  // set_sync() before the job starts.
  GradientPath(Engine& engine, GradientOwner& job, SchedulerFactory make_scheduler,
               SchedulerConfig initial, bool record_trace = false);
  ~GradientPath() override;
  GradientPath(const GradientPath&) = delete;
  GradientPath& operator=(const GradientPath&) = delete;

  // Before set_sync: the framework FIFO's engines (SchedulerSetup::fifo_engines; absent: the
  // strategy's default).
  void set_fifo_engines(std::optional<int> engines) { fifo_engines_ = engines; }
  // A released chunk's credit reaches its scheduler `delay` later (0: at once): the per-credit
  // cost of a scheduler that runs outside the framework's engine (ByteScheduler's Core is
  // told of a chunk's end by a callback into its own thread, which then pops the next chunk).
  void set_credit_delay(Time delay) { credit_delay_ = delay; }
  // Before set_sync: only the first `owners` schedulers schedule; the others start every chunk
  // as soon as it is ready (SchedulerSetup::immediate). Absent: every owner schedules.
  void set_scheduling_owners(std::optional<std::size_t> owners) { scheduling_owners_ = owners; }
  // Before set_sync, kPerWorker strategies only: a chunk a scheduler releases starts on no worker
  // until every worker's scheduler released it (an immediate one as soon as it is ready); then
  // on all of them at once. ByteScheduler's MXNet PS plugin does this for every partition: each
  // worker first pushes a one-value barrier key, which a sync-mode server answers only once
  // every worker pushed it, and the partition's push waits for that answer [code:
  // bytedance/byteps@bytescheduler, bytescheduler/mxnet/kvstore_task.py
  // KVStoreTask._post_push_pull_barrier; apache/mxnet 1.5.0 src/kvstore/kvstore_dist_server.h
  // KVStoreDistServer::DataHandleDefault, ApplyUpdates]. With only rank 0 scheduling, rank 0's
  // order and credit then pace every worker. The barrier's own round trip is not charged.
  void set_start_barrier(bool on) { start_barrier_ = on; }
  // Before set_sync: Ordering above (kRankZero is set_scheduling_owners(1)). kJob needs a
  // kPerWorker strategy.
  void set_ordering(Ordering ordering);

  // The strategy the path feeds (it calls on_chunk back); builds the schedulers it needs.
  void set_sync(GradientSync* sync);

  void gradient_ready(std::size_t worker, std::size_t layer) override;
  void on_chunk(std::size_t owner, const Chunk& chunk, bool release, bool arrived) override;
  void on_fetched(std::size_t worker, std::uint32_t layer) override {
    job_.parameters_fetched(worker, layer);
  }

  // Every scheduler's knobs (credit at once, partition for gradients cut afterwards; a
  // strategy whose layout depends on the partition must have nothing in flight).
  void set_config(const SchedulerConfig& config);
  SchedulerConfig config() const { return schedulers_.front()->config(); }
  const std::vector<ChunkEvent>& trace() const { return trace_; }
  // When the strategy last reported a chunk (back on a worker, or its credit released): a stall
  // watchdog's sign of progress.
  Time last_event() const { return last_event_; }

 private:
  void pump(std::size_t owner);
  void start_on(std::size_t owner, const Chunk& c);
  void give_back(std::size_t owner, const Chunk& c);
  void record(ChunkEvent::Kind kind, std::size_t owner, const Chunk& c);

  Engine& engine_;
  GradientOwner& job_;
  SchedulerFactory make_scheduler_;
  SchedulerConfig initial_;
  GradientSync* sync_ = nullptr;
  bool per_worker_ = true;
  bool job_order_ = false;  // Ordering::kJob
  std::vector<std::unique_ptr<CommScheduler>> schedulers_;
  std::vector<std::vector<std::uint32_t>> chunks_left_;  // per owner and layer: not back yet
  // kAllWorkers or kJob, per layer: workers that produced it
  std::vector<std::uint32_t> produced_;
  bool record_trace_;
  std::vector<ChunkEvent> trace_;
  std::optional<int> fifo_engines_;
  std::optional<std::size_t> scheduling_owners_;
  bool start_barrier_ = false;
  // start_barrier_: per (layer, chunk), the workers whose scheduler released it this round. A
  // worker releases a chunk again only after its last round is back, which needs every
  // worker's push of it: rounds never mix.
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::vector<std::size_t>> released_;
  Time credit_delay_;
  Time last_event_;
  // Credit returns still to come (credit_delay_), by sequence; cancelled if the path goes first.
  std::map<std::uint64_t, EventHandle> pending_;
  std::uint64_t next_pending_ = 0;
};

}  // namespace mlsim::training
