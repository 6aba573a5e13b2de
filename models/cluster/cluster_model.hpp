#pragma once
// The "cluster" model's scenario sections and its Model (docs/cluster.md).
#include <functional>
#include <memory>
#include <string>

#include "models/cluster/cluster_sim.hpp"
#include "models/cluster/communication_mode.hpp"
#include "sim_core/hardware/cost_model.hpp"
#include "sim_core/hardware/hardware.hpp"
#include "sim_core/hardware/node_hardware.hpp"
#include "sim_core/network/topology.hpp"
#include "sim_core/run/model.hpp"

namespace mlsim::cluster {

struct ModelParams {
  ClusterParams cluster;
  // Built at start (a Poisson source holds a random stream; a trace source an open file).
  std::function<std::unique_ptr<JobSource>(std::uint64_t seed)> make_source;
  // The detailed mode (system.detail "communication"): the training models the placed jobs run
  // on the training core over the run's network; null in the job-level mode.
  std::shared_ptr<const CommunicationParams> communication;
};

// Reads "system" and "workload"; errors name the JSON path. The node pool is the topology's
// hosts (pool node i is host i) with the GPUs `node_hardware` (topology.hardware) gives them;
// the reference GPU comes from `hardware`. `costs` (the compute section's providers) prices a
// Megatron model's operators; needed only with one.
ModelParams read_cluster_params(JsonReader& system, JsonReader& workload,
                                const HardwareCatalog& hardware, const Topology& topology,
                                const NodeHardware& node_hardware,
                                const std::filesystem::path& scenario_dir,
                                const CostModel* costs = nullptr);

std::unique_ptr<Model> make_cluster_model(ModelSetup& setup);

// What the gradient synchronisation `sync` (a training core strategy's name) sends per chunk of
// a data-parallel job on `workers` hosts (none on one): network transfers (exact for ring, tree
// and rat, a lower bound for ps and in-network aggregation) and bytes per gradient byte (exact
// for ring, tree, rat and ps as the strategies count them, sim_core/collectives).
double sync_transfers_per_chunk(const std::string& sync, int workers);
double sync_bytes_per_gradient_byte(const std::string& sync, int workers);

// The detailed mode's lower bounds of its work (budget.hpp) into `estimate`, from one pass over
// the job source: each job spanning hosts, its compute ops and its gradient transfers; throws
// an InputError at workload.jobs for a job in-network aggregation cannot hold (over 32 hosts).
// Nothing in the job-level mode. make_cluster_model calls it; public for tests.
void estimate_work(const ModelParams& p, int max_gpus_per_host, int pool_hosts,
                   WorkEstimate& estimate);

}  // namespace mlsim::cluster
