#pragma once
// One synchronous data-parallel training job as ByteScheduler and AutoByte study it
// (docs/commsched.md), assembled from the training core (models/training, docs/training.md):
// the core's compute loop, its gradient path with the chosen scheduler (framework FIFO or
// ByteScheduler) and a synchronisation strategy (parameter server or ring all-reduce). What is
// commsched's own is the tuners' hold on the knobs:
//
// Configuration changes (from a Controller at an iteration boundary of worker 0): a credit change
// applies at once; a partition change applies to gradients produced afterwards in all-reduce
// mode, and in PS mode stops the job (restart: the kvstore's keys change): no worker starts the
// next iteration until all communication has drained, then the job pauses for the decision's
// `pause` and resumes with the new configuration.
//
//   - PS mode (MXNet kvstore, training::PsSync): every worker has its own scheduler; a chunk is
//     pushed to the parameter servers and pulled back; its credit is held until the push
//     arrived, or until the pull is back (CreditScope below).
//   - All-reduce mode (Horovod, training::AllReduceSync, ring): one scheduler for the job, each
//   chunk a
//     ring all-reduce over the workers.
//
// Every message pays `message_overhead` before its bytes move (framework, RPC and NIC setup); the
// overhead delays the message but occupies no link. `message_cpu` is a cost the sending host pays
// per message, one message at a time (a communication thread), so many small chunks queue behind
// each other [inferred, off by default]. `ps_aggregation` is the servers' summing rate (the
// platform's PS processing cost, collectives::HostCosts; 0 = free, the default).
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "models/training/data_parallel_job.hpp"
#include "models/training/gradient_path.hpp"
#include "models/training/gradient_sync.hpp"
#include "sim_core/engine/engine.hpp"
#include "sim_core/hardware/compute.hpp"
#include "sim_core/network/network.hpp"

namespace mlsim::commsched {

using training::Chunk;
using training::ChunkEvent;
using training::LayerTimes;
using training::partition_tensor;
using training::SchedulerConfig;

enum class Mode { kParameterServer, kAllReduce };
enum class SchedulerKind { kFifo, kByteScheduler };
// PS mode: what a chunk's credit covers [inferred: the plugin's code was not readable].
//   - kPush: its push, until the servers have received it (a window of unacknowledged bytes);
//   - kPushPull: its push and its pull, until the aggregate is back on the worker. A worker's
//     window then waits on the other workers' pushes, and workers that drift apart (a
//     straggler) can deadlock: each holds credit for chunks the other has not pushed yet.
enum class CreditScope { kPush, kPushPull };
// PS mode: which workers' ByteScheduler schedules. kEveryWorker: each worker's own queue and
// credit; kRankZero: as ByteScheduler's MXNet plugin runs it [code: bytescheduler/mxnet/
// kvstore.py ScheduledKVStore.__init__ makes every rank but 0 "immediate", and
// common/bytecore.py ByteCore.post starts an immediate task's partitions at once, bypassing the
// queue and the credit]: worker 0 orders and paces its chunks. Each partition's push waits on
// every worker for a barrier key that the servers answer once every worker pushed it
// (kvstore_task.py KVStoreTask._post_push_pull_barrier; GradientPath::set_start_barrier): a
// chunk starts on all workers once it is ready on each and worker 0 released it, so worker 0's
// order and credit pace the others (before 2026-12-07 they pushed every chunk once ready).
enum class Scheduling { kEveryWorker, kRankZero };
// PS mode: how a worker's pushes share its connections to the servers (training::SyncOptions::
// in_order_connections). kInOrder: as ps-lite sends, one in-order connection per (worker,
// server): a push to server s leaves after the worker's earlier pushes to s arrived, pushes to
// different servers go at once [code: dmlc/ps-lite src/zmq_van.h ZMQVan::Connect (one
// ZMQ_DEALER socket per node), ZMQVan::SendMsg (queues the message on it and returns)].
// kShared: every push leaves at once and they share the links max-min (the model before
// 2026-12-07, kept to compare).
enum class PsConnections { kShared, kInOrder };

struct Layer {
  Time forward, backward;       // at speed 1, when JobSpec::worker_times is empty
  std::int64_t parameters = 0;  // gradient values
};

struct JobSpec {
  Mode mode = Mode::kParameterServer;
  SchedulerKind scheduler = SchedulerKind::kByteScheduler;
  std::vector<Layer> layers;             // forward order
  std::vector<NodeId> workers, servers;  // hosts; servers only in PS mode
  // Per worker (as `workers`), each layer's times on the GPU of the worker's host at speed 1 (the
  // workers' GPUs may differ). Empty: every worker takes `layers`' times.
  std::vector<std::vector<LayerTimes>> worker_times;
  std::size_t iterations = 1;
  double samples_per_iteration = 1;  // per worker
  std::int64_t bytes_per_parameter = 4;
  Time message_overhead;
  Time message_cpu;
  Bandwidth ps_aggregation;  // 0 = summing is free
  std::int64_t bigarray_bound = 1'000'000;
  CreditScope credit_scope = CreditScope::kPush;
  Scheduling scheduling = Scheduling::kEveryWorker;  // ByteScheduler, PS mode
  // Every scheduler, PS mode. The struct keeps kShared (the hand tests' setting); the scenario's
  // default is kInOrder (commsched_model.cpp).
  PsConnections ps_connections = PsConnections::kShared;
  // FIFO: the framework's communication engines per scheduler (per worker in PS mode, per job
  // in all-reduce mode), each one tensor at a time in ready order; 0 = every ready tensor at
  // once. The scenario's default in PS mode is 0 with in-order connections (MXNet hands every
  // ready push to ps-lite, whose connections serialise it) and one per server with shared ones
  // (the closest engine count before the connections were modelled); one in all-reduce mode.
  int fifo_engines = 1;
  // ByteScheduler: a released chunk's credit reaches the Core this much later (its end
  // callback into the Core's Python thread, which then pops the next chunk) [assumed, 0 = free].
  Time credit_delay;
  bool record_trace = false;  // keep every chunk event (tests)
};

// FIFO is the framework's own behaviour whatever the configuration: whole tensors in ready order,
// by JobSpec::fifo_engines engines (what FIFO reports below is the credit-1 view of one engine,
// used only when no engines count is known).
SchedulerConfig fifo_config(Mode mode);

struct Decision {
  SchedulerConfig config;
  Time pause;  // restart time, paid only when the change stops the job (PS partition change)
};

class TrainingJob;

// Called when worker 0 is about to start iteration `iteration` (>= 1).
class Controller {
 public:
  virtual ~Controller() = default;
  virtual std::optional<Decision> at_iteration(std::size_t iteration, TrainingJob& job) = 0;
};

struct ConfigChange {
  Time decided, applied;
  std::size_t iteration = 0;
  SchedulerConfig from, to;
  bool restart = false;
};

class TrainingJob final : private training::IterationHook {
 public:
  // `compute` must outlive the job: every forward and backward runs on it, on the worker's host
  // (its speed divides the layer's time, and a change stretches the op in progress).
  TrainingJob(Engine& engine, Network& network, Compute& compute, JobSpec spec,
              SchedulerConfig initial);
  TrainingJob(const TrainingJob&) = delete;
  TrainingJob& operator=(const TrainingJob&) = delete;

  void set_controller(Controller* controller) { controller_ = controller; }
  void start() { core_.start(); }
  bool finished() const { return core_.finished(); }
  double progress() const { return core_.progress(); }

  const JobSpec& spec() const { return spec_; }
  Time now() const { return engine_.now(); }
  SchedulerConfig config() const { return path_.config(); }
  Time finish_time() const { return core_.finish_time(); }
  // Start of each iteration's first forward op on worker 0.
  const std::vector<Time>& iteration_starts() const { return core_.iteration_starts(); }
  // Iteration times: between consecutive starts, the last one to the end of the run.
  std::vector<double> iteration_seconds() const { return core_.iteration_seconds(); }
  const std::vector<ConfigChange>& changes() const { return changes_; }
  const std::vector<ChunkEvent>& trace() const { return path_.trace(); }
  Time paused() const { return paused_; }
  std::int64_t bytes_sent() const { return sync_->bytes_sent(); }
  std::int64_t bytes_delivered() const { return sync_->bytes_delivered(); }
  std::uint64_t messages() const { return sync_->messages(); }
  // Per worker, compute time actually taken over nominal (profile) time since the last call.
  std::vector<double> take_compute_slowdown() { return core_.take_compute_slowdown(); }

 private:
  void iteration_done(std::size_t worker, std::size_t iteration, bool last) override;
  void apply(const Decision& d, std::size_t iteration);

  Engine& engine_;
  JobSpec spec_;
  Controller* controller_ = nullptr;
  training::DataParallelJob core_;
  training::GradientPath path_;
  std::unique_ptr<training::GradientSync> sync_;
  // Restart state.
  std::optional<Decision> restart_;
  Time restart_decided_;
  // Metrics.
  Time paused_;
  std::vector<ConfigChange> changes_;
};

}  // namespace mlsim::commsched
