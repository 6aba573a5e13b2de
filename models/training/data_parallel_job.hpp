#pragma once
// The training-job core (docs/training.md): one synchronous training job's compute on the
// platform. Each worker runs the ops its OpSchedule names (op_schedule.hpp: by default
// LayerByLayer, data parallelism: forward then backward, layer by layer; pipeline_schedule.hpp:
// 1F1B or GPipe over a pipeline's stages), each op the forward or backward of one micro-batch over
// a range of layers, on the platform's Compute on its host: the range's time on the worker's GPU
// (JobSpec::times or layer_seconds, already moved to that GPU) divided by the host's speed
// (HostSpeeds, changed by the scenario's `events` section), a speed change stretching or
// shrinking what remains of the op in progress; or, with an OpPricer (op_pricer.hpp), the
// model's own steps for the op, compute and collectives inside the host, run one after another
// (a Megatron job's layers with their tensor-parallel all-reduces). A backward that hands its
// gradients over gives each layer of its range to the GradientSink (the gradient path: scheduler,
// then synchronisation strategy), from the output side. An op waits until every gradient of its
// layers handed over before is back (parameters_back(); for data parallelism: the next iteration's
// forward of layer l waits for layer l's update), and, when the schedule says it needs one, for
// its input message (input_arrived(): an activation or a gradient between pipeline stages, sent
// by the model from its OpObserver); an op that ends_after_send keeps its worker until the model
// reports the send delivered (output_sent(), Megatron's blocking sends). A worker finishes its
// iteration when its schedule names no more op; the job is finished when every worker computed
// every iteration and every gradient is back.
//
// Hooks for what a model adds: an IterationHook hears each worker's iteration end (commsched's
// tuners change the scheduler there), an OpObserver each op's end (a pipeline sends its
// activations and gradients), hold_before() stops every worker before an iteration until all
// communication has drained (a restart), then release_hold() resumes; end_segment() / resume()
// are the same boundary for a schedule that is cut short and replaced (AutoPipe's switch: stop
// admitting, drain, resume with another schedule and placement).
//
// The training models on it: commsched and the cluster's detailed mode (ps, ring), ina (its INA
// strategy), embcache (a fetched embedding layer synchronised by Herald/HET, the dense layer by
// ps or ring through a LayerRouter), pipeline (stages as workers, a PipelineSchedule, its
// replicated stages' all-reduce fed by the gradient-ready events).
#include <cstdint>
#include <functional>
#include <set>
#include <utility>
#include <vector>

#include "models/training/gradient_owner.hpp"
#include "models/training/op_pricer.hpp"
#include "models/training/op_schedule.hpp"
#include "sim_core/engine/engine.hpp"
#include "sim_core/hardware/compute.hpp"

namespace mlsim::training {

struct LayerTimes {
  Time forward, backward;
  friend bool operator==(const LayerTimes&, const LayerTimes&) = default;
};

// The same in seconds at speed 1, for an op over several layers summed exactly in double (a
// pipeline stage's time as its planners price it).
struct LayerSeconds {
  double forward = 0, backward = 0;
};

struct JobSpec {
  std::vector<std::int64_t> parameters;  // per layer, forward order: gradient values
  std::vector<NodeId> workers;           // hosts
  // Per worker (as `workers`), each layer's times on the GPU of the worker's host at speed 1;
  // either `times` or `layer_seconds` (or neither, for ops priced by DataParallelJob's pricer).
  std::vector<std::vector<LayerTimes>> times;
  std::vector<std::vector<LayerSeconds>> layer_seconds;
  std::size_t iterations = 1;
  // Per layer (empty: none): the layer's parameters are fetched anew for every iteration before
  // its forward (an embedding layer pulls the rows of the iteration's batch from a parameter
  // server), so the forward of iteration i also waits for the (i+1)-th parameters_fetched().
  std::vector<bool> fetched_each_iteration;
};

class GradientSink {
 public:
  virtual ~GradientSink() = default;
  virtual void gradient_ready(std::size_t worker, std::size_t layer) = 0;
};

class IterationHook {
 public:
  virtual ~IterationHook() = default;
  // `worker` finished computing iteration `iteration` - 1 (its last backward op ended, its
  // gradient handed over); `last`: it was the job's last iteration.
  virtual void iteration_done(std::size_t worker, std::size_t iteration, bool last) = 0;
};

class OpObserver {
 public:
  virtual ~OpObserver() = default;
  // `worker` finished `op` (before its gradients are handed over); for an op that
  // ends_after_send, its compute (the op ends when the model calls output_sent()).
  virtual void op_done(std::size_t worker, const ScheduledOp& op) = 0;
  // A priced op's step `index` (OpPricer order) starts on `worker` now: a model that accounts
  // for its workers' time step by step (Megatron's exposed communication) hears each one.
  virtual void step_started(std::size_t /*worker*/, const ScheduledOp& /*op*/,
                            std::size_t /*index*/, const OpStep& /*step*/) {}
};

class DataParallelJob final : public GradientOwner {
 public:
  // `compute` must outlive the job: every forward and backward runs on it, on the worker's host.
  DataParallelJob(Engine& engine, Compute& compute, JobSpec spec);
  DataParallelJob(const DataParallelJob&) = delete;
  DataParallelJob& operator=(const DataParallelJob&) = delete;
  // Cancels the ops in progress, so a job can be destroyed mid-run (with its strategy, whose
  // collectives cancel their transfers: docs/collectives.md, "Cancellation").
  ~DataParallelJob() override;

  void set_gradient_sink(GradientSink* sink) { sink_ = sink; }
  void set_iteration_hook(IterationHook* hook) { hook_ = hook; }
  void set_op_observer(OpObserver* observer) { observer_ = observer; }
  // The order of every worker's ops (must outlive the job; LayerByLayer when never set). Set it
  // before start(); later only through resume().
  void set_schedule(const OpSchedule* schedule) { schedule_ = schedule; }
  // Ops priced by the model as steps (op_pricer.hpp) instead of from the spec's layer times
  // (which may then be left empty; given, they are not used). Must outlive the job; set it
  // before start().
  void set_op_pricer(const OpPricer* pricer) { pricer_ = pricer; }
  // Called once, when the job finishes (a model running several jobs frees it then; the
  // callback must not destroy the job from inside itself: it runs inside the job's own call).
  void set_on_finished(std::function<void()> on_finished) { on_finished_ = std::move(on_finished); }
  void start();

  // Layer `layer`'s updated parameters are on `worker`.
  void parameters_back(std::size_t worker, std::size_t layer) override;
  // A fetched layer's parameters for `worker`'s next iteration are there
  // (JobSpec::fetched_each_iteration).
  void parameters_fetched(std::size_t worker, std::size_t layer) override;
  // Layer `layer`'s parameters are on their way to `worker` (a re-partition moves them there):
  // its ops over the layer wait for the matching parameters_back(), and a drain waits for it.
  void expect_parameters(std::size_t worker, std::size_t layer);
  // The input of `worker`'s micro-batch `micro_batch` for its forward (an activation) or its
  // backward (a gradient) is there (ScheduledOp::needs_input).
  void input_arrived(std::size_t worker, std::size_t micro_batch, bool forward);
  // The output `worker`'s op in progress sent is delivered: an op that ends_after_send ends now.
  void output_sent(std::size_t worker);
  // `worker`'s rendezvous step in progress (OpStep::rendezvous) is over: its next step starts.
  void step_done(std::size_t worker);
  // Forwards `worker` has started in the current iteration (its op in progress included).
  std::size_t forwards_started(std::size_t worker) const;
  // Re-checks the hold and the end of the job; the gradient path calls it after every chunk.
  void check_progress() override;
  // No worker starts iteration `iteration` until release_hold(); `on_drained` runs once every
  // worker waits there and every gradient handed over is back.
  void hold_before(std::size_t iteration, std::function<void()> on_drained);
  void release_hold();
  // Segment boundary: the schedule in force has just been cut short (it names no op its workers
  // must not still run); every worker finishes the ops it still names, then waits, and
  // `on_drained` runs once every worker waits and every gradient handed over is back (maybe at
  // once). resume() then runs `next` as one more iteration (the next segment).
  void end_segment(std::function<void()> on_drained);
  void resume(const OpSchedule& next);
  // The job is given up (a model's watchdog found it hung): no op starts any more and the ops
  // in progress end without effect. It never finishes.
  void abort() { aborted_ = true; }
  bool aborted() const { return aborted_; }
  // When `worker` last got parameters back (parameters_back(); the job's start before any).
  Time last_update(std::size_t worker) const { return workers_[worker].last_update; }
  // When a compute op last ended (the job's start before any): a watchdog's sign of progress.
  Time last_compute_end() const { return last_compute_end_; }

  const JobSpec& spec() const { return spec_; }
  std::size_t gradient_workers() const override { return spec_.workers.size(); }
  std::size_t gradient_layers() const override { return spec_.parameters.size(); }
  std::int64_t layer_parameters(std::size_t layer) const override {
    return spec_.parameters[layer];
  }
  bool finished() const { return finished_; }
  Time finish_time() const { return finish_; }
  double progress() const;  // worker iterations computed / all
  // Updates applied so far to `layer`'s parameters on `worker`.
  std::size_t updates(std::size_t worker, std::size_t layer) const override {
    return workers_[worker].updated[layer];
  }
  // Start of each iteration's first forward op on worker 0.
  const std::vector<Time>& iteration_starts() const { return iteration_starts_; }
  // Iteration times: between consecutive starts, the last one to the end of the run.
  std::vector<double> iteration_seconds() const;
  // Per worker, compute time actually taken over nominal (profile) time since the last call.
  std::vector<double> take_compute_slowdown();

 private:
  struct Worker {
    std::size_t iteration = 0;
    bool busy = false, computing_done = false;
    bool sending = false;  // busy: the op's compute is over, its send not yet delivered
    std::size_t forwards = 0, backwards = 0;  // ops done in the current iteration
    ScheduledOp running;                      // the op in progress while busy
    std::vector<std::size_t> handed;   // per layer: gradients handed over (or up to date at once)
    std::vector<std::size_t> updated;  // per layer: updates applied to its parameters
    std::vector<std::size_t> fetched;  // per layer: fetches arrived (fetched layers only)
    std::set<std::pair<std::size_t, bool>> inputs;  // (micro-batch, forward) arrived, not used
    double nominal_s = 0, actual_s = 0;
    Time op_started, last_update;
    ComputeHandle op;  // the op in progress while busy (cancelled when the job is destroyed)
    // A priced op's steps and the one in progress; a collective step's end event.
    std::vector<OpStep> steps;
    std::size_t step = 0;
    EventHandle collective;
    bool in_rendezvous = false;  // at a rendezvous step, until step_done()
  };

  void try_start(std::size_t w);
  void run_step(std::size_t w);  // a priced op's next step, or its end
  void op_done(std::size_t w);   // the op's compute is over
  // The op is over: counted, the observer told (`notify`: not yet, at its compute's end), its
  // gradients handed over, the worker's next op tried.
  void end_op(std::size_t w, bool notify);
  // The end of w's iteration: counted (before its gradients go out), then reported (the hook and
  // the end of the job, after).
  void count_iteration(std::size_t w);
  void report_iteration(std::size_t w);
  double op_seconds(std::size_t w, const ScheduledOp& op) const;
  bool drained() const;

  Engine& engine_;
  Compute& compute_;
  JobSpec spec_;
  GradientSink* sink_ = nullptr;
  IterationHook* hook_ = nullptr;
  OpObserver* observer_ = nullptr;
  LayerByLayer layer_by_layer_;
  const OpSchedule* schedule_ = &layer_by_layer_;
  const OpPricer* pricer_ = nullptr;
  std::function<void()> on_finished_;
  std::vector<Worker> workers_;
  std::size_t pending_updates_ = 0;  // (worker, layer) gradients handed over, not back yet
  // Hold.
  static constexpr std::size_t kNoHold = static_cast<std::size_t>(-1);
  std::size_t gate_ = kNoHold;  // no worker starts this iteration yet
  std::function<void()> on_drained_;
  bool drain_reported_ = false;
  bool aborted_ = false;
  Time last_compute_end_;
  // Metrics.
  bool finished_ = false;
  Time finish_;
  std::vector<Time> iteration_starts_;
  std::size_t iterations_done_ = 0;  // worker iterations whose compute finished
};

}  // namespace mlsim::training
