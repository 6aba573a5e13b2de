#pragma once
// One pipeline-parallel training job run on the engine: stages on hosts (a stage may be
// replicated over several hosts, PipeDream's hybrid), run by the training core
// (models/training/data_parallel_job.hpp): the hosts are its workers, a stage's layers the layer
// range of its workers' ops, their order a PipelineSchedule (models/training/pipeline_schedule.hpp:
// 1F1B with PipeDream's in-flight limits and round-robin over a stage's replicas, or GPipe), and
// the core's segment boundary (end_segment / resume) a switch. What stays here: the planners, the
// switching decision, and what the model does on the core's events: activations and
// gradients (and a switch's migrated parameters) as point-to-point messages of the collective
// layer between the hosts (send_recv calls, sim_core/collectives/point_to_point.hpp, paying the
// layer's costs `collective_costs`, none by default), and the all-reduce of a replicated stage's
// parameters after each round of backwards (fed by the core's gradient-ready events) as a ring
// collective (sim_core/collectives). Every forward and backward is work on the platform's
// Compute, run by the core: the profile's layer times, measured on
// the profile's GPU, moved to the host's GPU type by the catalog scaling (profile_scaling.hpp)
// and divided by the host's speed (HostSpeeds), which Compute follows while the op runs. The
// hosts' link bandwidths come from LinkConditions. Speeds and bandwidths are read at the start
// (after the scenario's events at time 0) and followed through their listeners: the scenario's
// `events` section drives them.
//
// Policies:
//   - pipedream: PipeDream's configuration for the initial conditions (pipedream_partitioner.hpp,
//     with the options of its released optimizer), never changed.
//   - autopipe: the exact plan (autopipe_planner.hpp) at the start and again after every change;
//     when the plan beats the running configuration's steady-state time by more than `min_gain`,
//     the job switches to it.
//
// Switching [inferred: the AutoPipe abstract says only that it computes layer by layer during the
// switch]: the input stage stops admitting minibatches, the ones in flight finish on the old
// configuration (the pipeline drains), and meanwhile every host fetches the parameters of the
// layers it lacks (times `migrated_state_factor`, for optimizer state), one transfer per pair of
// hosts (migrations() in pipeline_costs.hpp); training resumes on the new configuration when
// both are done. Overlapping the copy with the drain is our reading of "layer by layer"; the
// drain itself is a cost AutoPipe may avoid, so the switching cost here is an upper bound.
// Changes during a switch are evaluated when it ends.
//
// A GPU speed change stretches or shrinks what remains of the op in progress (Compute). A host's
// link bandwidth is the smaller of its link to the network and the link back; a transfer's the
// smaller of its two hosts' (estimates assume the host links are the bottleneck).
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "models/pipeline/one_f_one_b.hpp"
#include "models/pipeline/pipedream_partitioner.hpp"
#include "models/pipeline/pipeline_costs.hpp"
#include "models/pipeline/rl_planner.hpp"
#include "models/pipeline/route_conditions.hpp"
#include "models/pipeline/stage_allreduce.hpp"
#include "models/training/data_parallel_job.hpp"
#include "models/training/pipeline_schedule.hpp"
#include "sim_core/collectives/collective.hpp"
#include "sim_core/collectives/point_to_point.hpp"
#include "sim_core/engine/engine.hpp"
#include "sim_core/hardware/compute.hpp"
#include "sim_core/hardware/host_speeds.hpp"
#include "sim_core/network/host_access_links.hpp"
#include "sim_core/network/link_conditions.hpp"
#include "sim_core/network/network.hpp"
#include "sim_core/network/topology.hpp"
#include "sim_core/run/results.hpp"

namespace mlsim::pipeline {

enum class Policy { kPipeDream, kAutoPipe };
// AutoPipe's planner: the exact search (autopipe_planner.hpp, the reference), the dynamic
// program over the bottleneck time (dp_planner.hpp) or the paper's RL agent (rl_planner.hpp).
enum class Planner { kExact, kDp, kRl };
// How a switch moves the parameters (see the header comment): drain the pipeline and copy, the
// new configuration starting once both are done; or layer by layer, each moved layer its own
// message, the new configuration starting at the drain's end and each op waiting only for the
// layers it computes.
enum class Switching { kDrainAndCopy, kLayerByLayer };

struct TrainingParams {
  std::vector<LayerCost> layers;
  // The GPU the profile was measured on (a catalog entry that outlives the job); every stage
  // host needs a GPU (topology.hardware).
  const GpuSpec* profiled_on = nullptr;
  std::vector<NodeId> hosts;  // the job's hosts, in the order stages take them
  // Each host's link to the network and the link back, and their latencies in seconds (speeds
  // and bandwidths come from the platform at the start).
  std::vector<AccessLinks> host_links;
  std::vector<double> latency_out, latency_in;
  std::size_t minibatches = 0;
  double samples_per_minibatch = 1;
  Policy policy = Policy::kPipeDream;
  // The op order: PipeDream's 1F1B (default) or GPipe with a flush every `gpipe_group`
  // micro-batches (minibatches of the workload). AutoPipe's planner and the estimates time the
  // same schedule; PipeDream's objective is its own (schedule-free, as released).
  training::PipelineSchedule::Kind schedule = training::PipelineSchedule::Kind::kOneFOneB;
  std::size_t gpipe_group = 1;
  double min_gain = 0.05;
  double migrated_state_factor = 2;
  Planner planner = Planner::kExact;
  Switching switching = Switching::kDrainAndCopy;
  RlOptions rl;
  std::uint64_t seed = 1;  // the scenario's: the RL planner's stream "pipeline.rl_planner"
  // PipeDream's optimizer options (pipedream_partitioner.hpp); `straight` also limits AutoPipe's
  // search to one host per stage.
  bool straight = false;
  std::optional<double> activation_compression_ratio;
  // PipeDream's hierarchical solve (system.pipedream_levels: --all_num_machines,
  // --network_bandwidths), innermost first; empty: one level over the hosts' links. A bandwidth
  // of 0 (the outermost level's, when the scenario leaves it out) is the narrowest job host
  // link when PipeDream plans.
  std::vector<PipeDreamOptions::Level> pipedream_levels;
  // GPU memory (system.memory, stage_memory.hpp): off by default, as PipeDream's
  // --use_memory_constraint. On, the PipeDream policy runs its optimizer's check against each
  // host's memory and AutoPipe's planners (exact, DP, RL) never return a configuration that does
  // not fit under mlsim's accounting. `capacity_override` is system.memory.capacity (absent: each
  // host's GPU from the catalog); apply_memory_limit (pipeline_model.hpp) fills `memory`.
  bool memory_constraint = false;
  std::optional<double> memory_capacity_override;
  double optimizer_state_factor = 1;
  MemoryLimit memory;
  // The collective layer's costs (system.costs, system.host) for every message and all-reduce;
  // none by default. The 1F1B timing model (one_f_one_b.hpp) does not include them.
  collectives::PointToPoint::Options collective_costs;
};

class PipelineTraining final : private training::OpObserver, private training::GradientSink {
 public:
  // `compute`, `speeds` and `links` must outlive the job; the job subscribes to the speeds and
  // links. Prices every layer on every stage host now (at prepare time).
  PipelineTraining(Engine& engine, Network& network, Compute& compute, HostSpeeds& speeds,
                   LinkConditions& links, TrainingParams params);
  void start();
  bool finished() const { return completed_ == params_.minibatches; }
  double progress() const {
    return static_cast<double>(completed_) / static_cast<double>(params_.minibatches);
  }
  void report(Results& out) const;

 private:
  // Starts the job on `p` (the first call) or resumes it there after a switch.
  void begin_segment(const Partition& p);
  // The core's events: an op ended (send its activation or gradient, count a minibatch), a
  // layer's gradient is ready (a replicated stage joins its round's all-reduce).
  void op_done(std::size_t w, const training::ScheduledOp& op) override;
  void gradient_ready(std::size_t w, std::size_t layer) override;
  // Starts round k's all-reduce of stage s once every replica that has a k-th update is in it.
  void maybe_start_allreduce(std::size_t s, std::size_t k);
  void speed_changed(NodeId host, double speed);
  void links_changed(std::span<const LinkId> changed);
  // Bytes/s of host h's links now.
  double host_bandwidth(std::size_t h) const;
  void conditions_changed();
  void consider_repartition();
  void maybe_resume();
  // Layer-by-layer switching: sends the moves one layer after another per pair of hosts.
  // Drain and copy: one transfer per pair of hosts.
  void send_migrations();
  void send_layer_moves(const std::vector<LayerMove>& moves);
  void send_next_layer(std::pair<std::size_t, std::size_t> pair);
  // The schedule the run executes, for the timing model.
  ScheduleTiming timing() const { return {params_.schedule, params_.gpipe_group}; }
  // The policy's configuration for the conditions `c` (counts the configurations timed).
  Partition plan(const Conditions& c);
  // AutoPipe's planner on `c` (exact, DP or RL), counting the configurations timed.
  Plan autopipe_search(const Conditions& c);

  Engine& engine_;
  Network& network_;
  Compute& compute_;
  HostSpeeds& speeds_;
  LinkConditions& links_;
  TrainingParams params_;
  RlPlanner rl_;  // used only with Planner::kRl; its policy learns across plans
  collectives::PointToPoint messages_;
  // The routes between the hosts as they are now (route_conditions.hpp), into now_, and the
  // links they cross (sorted): a change to one is a change of conditions.
  void set_routes();
  std::vector<LinkId> route_links_;
  Conditions now_;  // hosts' layer times at speed 1 (from the constructor), speeds, links
  bool started_ = false;
  Partition partition_;
  StageCosts base_costs_;  // of the current partition at speed 1 on each host's GPU, seconds
  std::unique_ptr<training::DataParallelJob> job_;
  // The current segment's schedule; the one before, kept until no call of the core can use it.
  std::unique_ptr<training::PipelineSchedule> schedule_, retired_schedule_;
  // Per stage: its layers with parameters (a replica joins a round once all have come).
  std::vector<std::size_t> stage_parameter_layers_;
  // Per worker: layers of the current round handed over, rounds joined in this segment.
  std::vector<std::size_t> layers_ready_, rounds_joined_;
  bool drained_ = false;           // the core reported the current segment drained
  std::size_t segment_limit_ = 0;  // minibatches of the current segment
  std::size_t completed_ = 0;      // minibatches finished in earlier segments and this one
  // All-reduce rounds of replicated stages: replicas done per (stage, round); collectives alive.
  std::map<std::pair<std::size_t, std::size_t>, std::size_t> round_done_;
  // This segment's all-reduces, per (stage, members): built on first use, rearmed every round.
  std::map<std::pair<std::size_t, std::size_t>, std::unique_ptr<StageAllReduce>> allreduces_;
  // Earlier segments' ones, freed where none of their callbacks can be running (op_done).
  std::vector<std::unique_ptr<StageAllReduce>> retired_allreduces_;
  // Switching state.
  bool switching_ = false, change_pending_ = false;
  Partition next_;
  std::size_t migrations_in_flight_ = 0;
  // Layer by layer: per (source, destination) host, the layers still to send, the first in
  // flight; the (worker, layer) copies in flight; those the running segment waits for.
  std::map<std::pair<std::size_t, std::size_t>, std::vector<LayerMove>> layer_chains_;
  std::set<std::pair<std::size_t, std::size_t>> layers_in_flight_, layers_awaited_;
  std::uint64_t layers_waited_for_ = 0;
  Time switch_started_;
  // Metrics.
  Time finish_;
  std::int64_t switch_ns_ = 0;
  double migrated_bytes_ = 0, allreduce_bytes_ = 0;
  std::uint64_t failed_transfers_ = 0, repartitions_ = 0, plans_evaluated_ = 0,
                allreduce_count_ = 0;
  std::uint64_t configurations_timed_ = 0;
  double initial_estimate_s_ = 0, initial_pipedream_objective_s_ = 0;
  double pipedream_value_s_ = 0;  // the PipeDream policy's last plan's own value
  std::vector<std::pair<Time, Partition>> history_;
  TimeSeries progress_series_{"progress", {"minibatches_completed"}, {}};
};

}  // namespace mlsim::pipeline
