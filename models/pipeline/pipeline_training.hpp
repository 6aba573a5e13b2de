#pragma once
// One pipeline-parallel training job run on the engine: stages on hosts, 1F1B on each stage's
// GPU (one_f_one_b.hpp for the order), activations and gradients as network transfers between the
// stages' hosts. Every forward and backward is work on the platform's Compute: the profile's layer
// times, measured on the profile's GPU, moved to the stage host's GPU type by the catalog scaling
// (profile_scaling.hpp) and divided by the host's speed (HostSpeeds), which Compute follows while
// the op runs. The stage hosts' link bandwidths come from LinkConditions. Speeds and bandwidths
// are read at the start (after the scenario's events at time 0) and followed through their
// listeners: the scenario's `events` section drives them.
//
// Policies:
//   - pipedream: PipeDream's partition for the initial conditions, never changed.
//   - autopipe: the oracle plan (autopipe_planner.hpp) at the start and again after every change;
//     when the plan beats the running partition's steady-state time by more than `min_gain`, the
//     job switches to it.
//
// Switching [inferred: the AutoPipe abstract says only that it computes layer by layer during the
// switch]: the input stage stops admitting minibatches, the ones in flight finish on the old
// partition (the pipeline drains), and meanwhile the parameters of every layer that changes GPU
// (times `migrated_state_factor`, for optimizer state) travel to its new GPU, one transfer per
// pair of GPUs; training resumes on the new partition when both are done. Overlapping the copy
// with the drain is our reading of "layer by layer"; the drain itself is a cost AutoPipe may
// avoid, so the switching cost here is an upper bound. Changes during a switch are evaluated when
// it ends.
//
// A GPU speed change stretches or shrinks what remains of the op in progress (Compute). A
// stage host's link bandwidth is the smaller of its link to the network and the link back; a
// boundary's is the smaller of its two hosts' (estimates assume the host links are the bottleneck).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "models/pipeline/pipeline_costs.hpp"
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

struct TrainingParams {
  std::vector<LayerCost> layers;
  // The GPU the profile was measured on (a catalog entry that outlives the job); every stage
  // host needs a GPU (topology.hardware).
  const GpuSpec* profiled_on = nullptr;
  std::vector<NodeId> hosts;  // stage s runs on hosts[s]
  // Each stage host's link to the network and the link back.
  std::vector<AccessLinks> host_links;
  // Link latencies between consecutive stages (speeds and bandwidths come from the platform at
  // the start).
  std::vector<double> link_latency;
  std::size_t minibatches = 0;
  double samples_per_minibatch = 1;
  Policy policy = Policy::kPipeDream;
  double min_gain = 0.05;
  double migrated_state_factor = 2;
};

class PipelineTraining {
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
  struct Stage {
    std::size_t forwards = 0, backwards = 0;  // in the current segment
    bool busy = false, running_forward = false;
    std::set<std::size_t> activations, gradients;  // arrived, not yet used (segment numbering)
  };

  void begin_segment(const Partition& p);
  void try_start(std::size_t s);
  void op_done(std::size_t s, bool forward, std::size_t m);
  void speed_changed(NodeId host, double speed);
  void links_changed(std::span<const LinkId> changed);
  // Bytes/s of stage s's host links now.
  double host_bandwidth(std::size_t s) const;
  void conditions_changed();
  void consider_repartition();
  void maybe_resume();

  Engine& engine_;
  Network& network_;
  Compute& compute_;
  HostSpeeds& speeds_;
  LinkConditions& links_;
  TrainingParams params_;
  Conditions now_;  // stage hosts' layer times at speed 1 (from the constructor), speeds, links
  bool started_ = false;
  Partition partition_;
  StageCosts base_costs_;  // of the current partition at speed 1 on each host's GPU, seconds
  std::vector<Stage> stages_;
  std::size_t segment_limit_ = 0;  // minibatches of the current segment
  std::size_t completed_ = 0;      // minibatches finished in earlier segments and this one
  // Switching state.
  bool switching_ = false, change_pending_ = false;
  Partition next_;
  std::size_t migrations_in_flight_ = 0;
  Time switch_started_;
  // Metrics.
  Time finish_;
  std::int64_t switch_ns_ = 0;
  double migrated_bytes_ = 0;
  std::uint64_t failed_transfers_ = 0, repartitions_ = 0, plans_evaluated_ = 0;
  double initial_estimate_s_ = 0, initial_pipedream_objective_s_ = 0;
  std::vector<std::pair<Time, Partition>> history_;
  TimeSeries progress_series_{"progress", {"minibatches_completed"}, {}};
};

}  // namespace mlsim::pipeline
