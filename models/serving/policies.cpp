#include "models/serving/policies.hpp"

#include "models/serving/chunked_prefill.hpp"
#include "models/serving/continuous_batching.hpp"
#include "models/serving/static_batching.hpp"

namespace mlsim::serving {
namespace {

template <typename T>
auto make() {
  return [] { return std::make_unique<T>(); };
}

ServingPolicies build() {
  ServingPolicies p;
  p.schedulers
      .add("static",
           "request-level batching: a batch forms only on an empty replica, reserves KV for its "
           "whole length, and decodes until its last request ends",
           make<StaticBatching>())
      .add("continuous",
           "vLLM: iteration-level batching; admits waiting prompts as a prefill batch while "
           "their KV fits, else decodes every running request; preempts the newest on a full "
           "pool",
           make<ContinuousBatching>())
      .add("chunked_prefill",
           "Sarathi: decodes first, then prefill chunks filling the iteration's token budget",
           make<ChunkedPrefill>());
  p.routers
      .add("least_outstanding_tokens",
           "the replica with the fewest prefill and output tokens still to process",
           make<LeastOutstandingTokensRouter>())
      .add("round_robin", "replicas in turn", make<RoundRobinRouter>())
      .add("prefix_affinity",
           "the replica caching the longest prefix of the prompt, then the fewest outstanding "
           "tokens",
           make<PrefixAffinityRouter>());
  p.modes
      .add("separate", "each family member served by its own deployment", DeploymentMode::kSeparate)
      .add("mfs",
           "model-family serving: one copy of the largest member, tiers leave at exit layers, "
           "features shared, escalation in place",
           DeploymentMode::kMfs);
  p.process_groups
      .add("single_world",
           "one static process group over every stage worker: a failure stops the deployment "
           "until the group is rebuilt (weights reloaded), growth needs a restart",
           ProcessGroupSemantics{false, false, false})
      .add("multiworld",
           "MultiWorld: one world per pair of neighbouring stage workers; a failure breaks only "
           "its worlds (traffic re-routes), new workers join online; sends pay async polling",
           ProcessGroupSemantics{true, true, true});
  p.stage_routers
      .add("round_robin",
           "elastic stage boundaries: an engine goes to the next live worker in turn "
           "(pymultiworld's "
           "serving example, m8d.py run_leader; the default)",
           StageRouting::kRoundRobin)
      .add("fewest_engines",
           "elastic stage boundaries: an engine goes to the live worker with the fewest engines "
           "bound, the first among equals (assignments balanced, not load)",
           StageRouting::kFewestEngines)
      .add("least_work",
           "elastic stage boundaries: an engine goes to the live worker whose engines have the "
           "fewest tokens still to process (join the shortest queue by work)",
           StageRouting::kLeastWork);
  p.rebalancers
      .add("fewest_engines",
           "elastic joins: engines move to the live worker with the fewest engines bound until the "
           "counts differ by at most one (each moved engine's requests recompute; the default)",
           Rebalancing::kFewestEngines)
      .add(
          "least_work",
          "elastic joins: an engine holding KV moves from the worker with the most work to the one "
          "with the least only while that narrows their gap, counting the recompute; engines "
          "without KV even out by counts",
          Rebalancing::kLeastWork);
  return p;
}

}  // namespace

std::vector<PolicyInfo> ServingPolicies::describe() const {
  std::vector<PolicyInfo> out;
  modes.describe(out);
  schedulers.describe(out);
  routers.describe(out);
  process_groups.describe(out);
  stage_routers.describe(out);
  rebalancers.describe(out);
  return out;
}

const ServingPolicies& serving_policies() {
  static const ServingPolicies policies = build();
  return policies;
}

std::unique_ptr<BatchScheduler> make_scheduler(std::string_view name, const std::string& where) {
  return serving_policies().schedulers.get(name, where).value();
}

std::unique_ptr<Router> make_router(std::string_view name, const std::string& where) {
  return serving_policies().routers.get(name, where).value();
}

}  // namespace mlsim::serving
