#include "models/collectives/collectives_model.hpp"

#include <limits>
#include <optional>

#include "models/collectives/policies.hpp"
#include "sim_core/base/error.hpp"
#include "sim_core/collectives/rat_plan.hpp"
#include "sim_core/collectives/read_costs.hpp"
#include "sim_core/run/events.hpp"

namespace mlsim::collectives {
namespace {

// The collective is built at prepare time, so `mlsim validate` sees every error building it can
// raise; what depends on the links' state (rat's plan, the protocol) is decided when it starts,
// after the events at "0s" have applied.
class CollectivesModel final : public Model {
 public:
  CollectivesModel(ModelEnv& env, const CollectivesParams& params)
      : params_(params),
        participants_(env.topology.hosts().begin(),
                      env.topology.hosts().begin() + params_.participants),
        collective_(env.engine, env.network, participants_, params_.spec, nullptr, &env.links) {}

  void start(ModelEnv&) override { collective_.start(); }

  void finish(ModelEnv& env, Results& out) override {
    const CollectiveResult r = collective_.result();
    out.set_metric("completed", r.completed ? 1 : 0);
    // A collective that never completed (a partition) has no completion time or bandwidth:
    // NaN ("nan" in summary.json and CSVs), not the time at which the engine ran dry.
    const double nan = std::numeric_limits<double>::quiet_NaN();
    out.set_metric("completion_time_s", r.completed ? r.seconds() : nan);
    out.set_metric("algbw_bytes_per_s", r.completed ? r.algorithm_bandwidth() : nan);
    out.set_metric("busbw_bytes_per_s", r.completed ? r.bus_bandwidth() : nan);
    out.set_metric("sent_bytes", static_cast<double>(r.bytes_sent.count));
    out.set_metric("wire_bytes", static_cast<double>(r.wire_bytes.count));
    out.set_metric("transfers", static_cast<double>(r.transfers));
    out.set_metric("failed_transfers", static_cast<double>(r.failed_transfers));
    out.details()["operation"] = std::string(to_string(params_.spec.operation));
    out.details()["algorithm"] = std::string(to_string(r.algorithm));
    out.details()["ranks"] = r.ranks;
    if (r.protocol) out.details()["protocol"] = std::string(to_string(*r.protocol));
    out.details()["tensor_bytes"] = r.tensor.count;
    if (r.verified_pieces)
      out.set_metric("verified_pieces", static_cast<double>(*r.verified_pieces));
    if (params_.spec.algorithm == Algorithm::kRat) {
      // The regions rat found, with their nominal oversubscription.
      nlohmann::json regions = nlohmann::json::array();
      for (const Region& g : find_regions(env.topology, participants_))
        regions.push_back({{"gateway", env.topology.node(g.gateway).name},
                           {"hosts", g.members.size()},
                           {"oversubscription", oversubscription(env.topology, g)}});
      out.details()["regions"] = std::move(regions);
    }
  }

  double progress(const ModelEnv&) const override { return collective_.progress(); }

 private:
  CollectivesParams params_;
  std::vector<NodeId> participants_;
  Collective collective_;
};

}  // namespace

CollectivesParams read_collectives_params(JsonReader& system, const Topology& topology) {
  CollectivesParams p;
  CollectiveSpec& s = p.spec;
  const std::size_t hosts = topology.hosts().size();
  system.ignore("model");  // chosen by the runner
  const CollectivesPolicies& policies = collectives_policies();
  s.operation = policies.operations.choose_or(system, "operation", "all_reduce").value;
  // All-reduce names its algorithm; the other operations have one each, named by default.
  // validate() checks that the algorithm serves the operation.
  const AlgorithmSetting algorithm =
      s.operation == Operation::kAllReduce
          ? policies.algorithms.choose(system, "algorithm").value
          : policies.algorithms
                .choose_or(system, "algorithm",
                           std::string(to_string(algorithms_for(s.operation).front())))
                .value;
  s.algorithm = algorithm.algorithm;
  s.algorithm_by_size = algorithm.by_size;
  s.bytes = system.bytes("bytes");
  s.chunks = static_cast<int>(system.integer_or("chunks", 1, 1, 1 << 20));
  s.window = static_cast<int>(system.integer_or("window", 1, 0, 1 << 20));
  const auto max_hosts = static_cast<std::int64_t>(hosts);
  p.participants = static_cast<int>(system.integer_or("participants", 0, 0, max_hosts));
  if (p.participants == 0) p.participants = static_cast<int>(hosts);
  if (s.algorithm == Algorithm::kParameterServer) {
    s.servers = static_cast<int>(system.integer_or("servers", 1, 1, max_hosts));
    s.placement = policies.placements.choose_or(system, "placement", "dedicated").value;
  }
  if (s.algorithm == Algorithm::kTree || s.algorithm_by_size)
    s.arity = static_cast<int>(system.integer_or("arity", 2, 1, 1 << 16));
  if (s.algorithm == Algorithm::kRing)
    s.channels = static_cast<int>(system.integer_or("channels", 1, 1, 1 << 10));
  if (std::optional<JsonReader> costs = system.optional_object("costs"))
    s.costs = read_cost_model(*costs);
  if (std::optional<JsonReader> host = system.optional_object("host"))
    s.host = read_host_costs(*host);
  reject_moved_key(system, "link_changes", "a link change");
  system.finish();
  validate(s, static_cast<std::size_t>(p.participants), system.path());
  if (s.algorithm == Algorithm::kNvls) {
    const std::vector<NodeId> first(topology.hosts().begin(),
                                    topology.hosts().begin() + p.participants);
    if (!shared_switch(topology, first))
      throw InputError(system.path_of("algorithm"),
                       "nvls reduces in a switch: every participant must hang off one switch");
  }
  return p;
}

std::unique_ptr<Model> make_collectives_model(ModelEnv& env, const CollectivesParams& params) {
  return std::make_unique<CollectivesModel>(env, params);
}

}  // namespace mlsim::collectives
