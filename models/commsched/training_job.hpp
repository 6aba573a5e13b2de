#pragma once
// One synchronous data-parallel training job on the engine and the network, with its gradient
// communication scheduled by a CreditScheduler (docs/commsched.md).
//
// Each worker runs forward then backward, layer by layer, on its GPU. Backward ends layer by layer
// from the output side; each finished layer's gradient is cut into chunks and handed to the
// scheduler. The next iteration's forward of layer l waits until layer l's updated parameters are
// back on the worker (its pull, or its all-reduce). Chunks leave as the scheduler allows.
//
//   - PS mode (MXNet kvstore): every worker has its own scheduler. A chunk is pushed to the
//     parameter servers and pulled back; its credit is held until the push arrived, or until the
//     pull is back (CreditScope below). The
//     kvstore places a message: larger than `bigarray_bound` parameters, it is sliced evenly over
//     all servers; otherwise it goes whole to server (key mod servers), keys numbered over
//     (layer, chunk) [MXNet kvstore_dist: MXNET_KVSTORE_BIGARRAY_BOUND, memory, unverified]. A
//     server answers a slice's pulls once all workers pushed it.
//   - All-reduce mode (Horovod): one scheduler for the job (Horovod's coordinator), a layer is
//     ready once every worker produced it, and each chunk is a ring all-reduce over the workers:
//     2 (N - 1) steps of chunk / N bytes, each worker forwarding a step as soon as it received
//     the previous one.
//
// Every message pays `message_overhead` before its bytes move (framework, RPC and NIC setup); the
// overhead delays the message but occupies no link. `message_cpu` is a cost the sending host pays
// per message, one message at a time (a communication thread), so many small chunks queue behind
// each other [inferred, off by default].
//
// Configuration changes (from a Controller at an iteration boundary of worker 0): a credit change
// applies at once; a partition change applies to gradients produced afterwards in all-reduce
// mode, and in PS mode stops the job (restart): no worker starts the next iteration until all
// communication has drained, then the job pauses for the decision's `pause` and resumes with the
// new configuration.
//
// Every op runs on the platform's Compute on the worker's host: its profile time (already on the
// worker's GPU: JobSpec::worker_times) divided by the host's speed (HostSpeeds, changed by the
// scenario's `events` section: stragglers), and a speed change stretches or shrinks what remains of
// the op in progress.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "models/commsched/credit_scheduler.hpp"
#include "sim_core/engine/engine.hpp"
#include "sim_core/hardware/compute.hpp"
#include "sim_core/network/network.hpp"
#include "sim_core/network/topology.hpp"

namespace mlsim::commsched {

enum class Mode { kParameterServer, kAllReduce };
enum class SchedulerKind { kFifo, kByteScheduler };
// PS mode: what a chunk's credit covers [inferred: the plugin's code was not readable].
//   - kPush: its push, until the servers have received it (a window of unacknowledged bytes);
//   - kPushPull: its push and its pull, until the aggregate is back on the worker. A worker's
//     window then waits on the other workers' pushes, and workers that drift apart (a
//     straggler) can deadlock: each holds credit for chunks the other has not pushed yet.
enum class CreditScope { kPush, kPushPull };

struct Layer {
  Time forward, backward;       // at speed 1, when JobSpec::worker_times is empty
  std::int64_t parameters = 0;  // gradient values
};

struct LayerTimes {
  Time forward, backward;
  friend bool operator==(const LayerTimes&, const LayerTimes&) = default;
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
  std::int64_t bigarray_bound = 1'000'000;
  CreditScope credit_scope = CreditScope::kPush;
  bool record_trace = false;  // keep every chunk event (tests)
};

// FIFO is the framework's own behaviour whatever the configuration: whole tensors in ready order,
// all at once in PS mode (MXNet pushes each gradient as it is produced), one at a time in
// all-reduce mode (Horovod runs collectives in order on one stream) [inferred].
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

// kComplete: the chunk gave its credit back.
struct ChunkEvent {
  enum class Kind { kStart, kComplete } kind = Kind::kStart;
  Time at;
  std::size_t worker = 0;  // 0 in all-reduce mode (one scheduler)
  std::size_t iteration = 0;
  Chunk chunk;
  std::int64_t credit_left = 0;  // after the event
};

struct ConfigChange {
  Time decided, applied;
  std::size_t iteration = 0;
  SchedulerConfig from, to;
  bool restart = false;
};

class TrainingJob {
 public:
  // `compute` must outlive the job: every forward and backward runs on it, on the worker's host
  // (its speed divides the layer's time, and a change stretches the op in progress).
  TrainingJob(Engine& engine, Network& network, Compute& compute, JobSpec spec,
              SchedulerConfig initial);
  TrainingJob(const TrainingJob&) = delete;
  TrainingJob& operator=(const TrainingJob&) = delete;

  void set_controller(Controller* controller) { controller_ = controller; }
  void start();
  bool finished() const { return finished_; }
  double progress() const;

  const JobSpec& spec() const { return spec_; }
  Time now() const { return engine_.now(); }
  const SchedulerConfig& config() const { return config_; }
  Time finish_time() const { return finish_; }
  // Start of each iteration's first forward op on worker 0.
  const std::vector<Time>& iteration_starts() const { return iteration_starts_; }
  // Iteration times: between consecutive starts, the last one to the end of the run.
  std::vector<double> iteration_seconds() const;
  const std::vector<ConfigChange>& changes() const { return changes_; }
  const std::vector<ChunkEvent>& trace() const { return trace_; }
  Time paused() const { return paused_; }
  std::int64_t bytes_sent() const { return bytes_sent_; }
  std::int64_t bytes_delivered() const { return bytes_delivered_; }
  std::uint64_t messages() const { return messages_; }
  // Per worker, compute time actually taken over nominal (profile) time since the last call.
  std::vector<double> take_compute_slowdown();

 private:
  // What a message is, to route its delivery (small enough to ride in an engine event).
  struct Message {
    enum class Kind : std::uint8_t { kPush, kPull, kRing } kind = Kind::kPush;
    std::uint32_t worker = 0;  // push: sender; pull and ring: receiver
    std::uint32_t layer = 0, chunk = 0;
    std::uint32_t part = 0;  // PS: slice; ring: step
  };
  struct Worker {
    Worker(Order order, std::int64_t credit, std::size_t layers);
    std::size_t iteration = 0;
    bool forward = true, busy = false, computing_done = false;
    std::size_t position = 0;                // ops done in the current pass
    std::vector<std::size_t> updated;        // per layer: updates applied to its parameters
    std::vector<std::uint32_t> chunks_left;  // PS, per layer: chunks of the gradient in flight
    // PS, per layer and chunk: slices whose push (pull) has not arrived.
    std::vector<std::vector<std::uint32_t>> pushes_left, pulls_left;
    CreditScheduler scheduler;  // PS
    double nominal_s = 0, actual_s = 0;
    Time op_started;
  };

  void try_start(std::size_t w);
  void op_done(std::size_t w, std::size_t layer, bool forward);
  void gradient_ready(std::size_t w, std::size_t layer);
  CreditScheduler& scheduler_of(std::size_t w);
  void pump(std::size_t w);
  void start_chunk(std::size_t w, const Chunk& chunk);
  // The chunk gives its credit back (`release`) and/or its aggregate is on the worker(s).
  void chunk_done(std::size_t w, const Chunk& chunk, bool release, bool arrived);
  void layer_updated(std::size_t w, std::size_t layer);
  void send(NodeId src, NodeId dst, std::int64_t bytes, Message m);
  void delivered(const Message& m, const TransferResult& r);
  // PS
  void push_delivered(std::size_t w, std::uint32_t layer, std::uint32_t chunk, std::uint32_t slice);
  void pull_delivered(std::size_t w, std::uint32_t layer, std::uint32_t chunk);
  std::uint32_t slice_count(std::uint32_t layer, std::uint32_t chunk) const;
  std::int64_t slice_parameters(std::uint32_t layer, std::uint32_t chunk,
                                std::uint32_t slice) const;
  std::size_t server_of(std::uint32_t layer, std::uint32_t chunk, std::uint32_t slice) const;
  void set_partition(std::int64_t partition);
  // All-reduce
  void ring_step(std::uint32_t layer, std::uint32_t chunk, std::size_t sender, std::uint32_t step);
  // Configuration changes
  void apply(const Decision& d, std::size_t iteration);
  void maybe_resume();
  void check_finished();
  void record(ChunkEvent::Kind kind, std::size_t w, const Chunk& c);

  Engine& engine_;
  Network& network_;
  Compute& compute_;
  JobSpec spec_;
  SchedulerConfig config_;
  Controller* controller_ = nullptr;
  std::vector<Worker> workers_;
  CreditScheduler shared_scheduler_;  // all-reduce mode
  // Current cut of each layer (PS: fixed between restarts; all-reduce: set when a layer is ready).
  std::vector<std::vector<std::int64_t>> chunks_;
  std::vector<std::size_t> first_key_;                           // PS: key of each layer's chunk 0
  std::vector<std::vector<std::vector<std::uint32_t>>> pushes_;  // PS: per layer, chunk, slice
  std::vector<std::uint32_t> produced_;                      // all-reduce: workers done per layer
  std::vector<std::vector<std::uint32_t>> ring_deliveries_;  // all-reduce: per layer, chunk
  std::vector<std::uint32_t> layer_chunks_left_;             // all-reduce: per layer
  std::map<NodeId, Time> sender_free_;  // message_cpu: when each host's sender is next free
  std::size_t pending_updates_ = 0;     // (worker, layer) gradients not yet back
  // Restart state.
  std::optional<Decision> restart_;
  std::size_t gate_ = static_cast<std::size_t>(-1);  // no worker starts this iteration yet
  Time restart_decided_;
  bool resuming_ = false;
  // Metrics.
  bool finished_ = false;
  Time finish_, paused_;
  std::vector<Time> iteration_starts_;
  std::vector<ConfigChange> changes_;
  std::vector<ChunkEvent> trace_;
  std::int64_t bytes_sent_ = 0, bytes_delivered_ = 0;
  std::uint64_t messages_ = 0;
  std::size_t iterations_done_ = 0;  // worker iterations whose compute finished
};

}  // namespace mlsim::commsched
