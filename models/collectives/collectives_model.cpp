#include "models/collectives/collectives_model.hpp"

#include <optional>

#include "sim_core/error.hpp"

namespace mlsim::collectives {
namespace {

class CollectivesModel final : public Model {
 public:
  explicit CollectivesModel(const CollectivesParams& params) : params_(params) {}

  void start(ModelEnv& env) override {
    const auto& hosts = env.topology.hosts();
    std::vector<NodeId> participants(hosts.begin(), hosts.begin() + params_.participants);
    collective_.emplace(env.engine, env.network, std::move(participants), params_.spec);
    collective_->start();
  }

  void finish(ModelEnv&, Results& out) override {
    const CollectiveResult r = collective_->result();
    out.set_metric("completed", r.completed ? 1 : 0);
    out.set_metric("completion_time_s", r.seconds());
    out.set_metric("algbw_bytes_per_s", r.algorithm_bandwidth());
    out.set_metric("busbw_bytes_per_s", r.bus_bandwidth());
    out.set_metric("sent_bytes", static_cast<double>(r.bytes_sent.count));
    out.set_metric("transfers", static_cast<double>(r.transfers));
    out.set_metric("failed_transfers", static_cast<double>(r.failed_transfers));
    out.details()["algorithm"] = std::string(to_string(params_.spec.algorithm));
    out.details()["ranks"] = r.ranks;
    out.details()["tensor_bytes"] = r.tensor.count;
  }

  double progress(const ModelEnv&) const override {
    return collective_ ? collective_->progress() : 0;
  }

 private:
  CollectivesParams params_;
  std::optional<Collective> collective_;
};

}  // namespace

CollectivesParams read_collectives_params(JsonReader& system, std::size_t hosts) {
  CollectivesParams p;
  CollectiveSpec& s = p.spec;
  system.ignore("model");  // chosen by the runner
  const std::string algorithm = system.choice("algorithm", {"ring", "ps", "tree"});
  s.algorithm = algorithm == "ring" ? Algorithm::kRing
                : algorithm == "ps" ? Algorithm::kParameterServer
                                    : Algorithm::kTree;
  s.bytes = system.bytes("bytes");
  s.chunks = static_cast<int>(system.integer_or("chunks", 1, 1, 1 << 20));
  s.window = static_cast<int>(system.integer_or("window", 1, 0, 1 << 20));
  const auto max_hosts = static_cast<std::int64_t>(hosts);
  p.participants = static_cast<int>(system.integer_or("participants", 0, 0, max_hosts));
  if (p.participants == 0) p.participants = static_cast<int>(hosts);
  if (s.algorithm == Algorithm::kParameterServer) {
    s.servers = static_cast<int>(system.integer_or("servers", 1, 1, max_hosts));
    s.placement =
        system.choice_or("placement", {"dedicated", "colocated"}, "dedicated") == "dedicated"
            ? Placement::kDedicated
            : Placement::kColocated;
  }
  if (s.algorithm == Algorithm::kTree)
    s.arity = static_cast<int>(system.integer_or("arity", 2, 1, 1 << 16));
  system.finish();
  validate(s, static_cast<std::size_t>(p.participants), system.path());
  return p;
}

std::unique_ptr<Model> make_collectives_model(const CollectivesParams& params) {
  return std::make_unique<CollectivesModel>(params);
}

}  // namespace mlsim::collectives
