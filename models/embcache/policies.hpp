#pragma once
// The embcache model's registered policies (sim_core/run/policy_registry.hpp): training systems,
// each a preset of an input allocation and a cache sync (the scenario may set either apart, for
// ablations), and the allocations and syncs themselves. Adding one: one add() line in
// policies.cpp (a new mechanism also needs its code in embedding_sync, the training core's
// strategy that runs them). The dense layer's sync (ps, ring) is chosen from the training core's
// registry (models/training/policies.hpp).
#include <string>
#include <vector>

#include "models/embcache/embedding_training.hpp"
#include "sim_core/base/time.hpp"
#include "sim_core/run/policy_registry.hpp"

namespace mlsim::embcache {

struct SystemPreset {
  std::string allocation;  // names in EmbcachePolicies::allocations / syncs: the defaults
  std::string sync;
};

// Per-message host costs of a transport (`system.transport`), the defaults of
// system.host.message_overhead (the sender's CPU per message, one message after another) and
// system.host.message_latency (a delay per message that holds neither host nor link).
struct TransportProfile {
  Time message_overhead, message_latency;
};

struct EmbcachePolicies {
  PolicyRegistry<SystemPreset> systems{"policy"};
  PolicyRegistry<TransportProfile> transports{"transport"};
  PolicyRegistry<Allocation> allocations{"allocation"};
  PolicyRegistry<Sync> syncs{"sync"};
  std::vector<PolicyInfo> describe() const;
};

// Built on first use, never changed afterwards.
const EmbcachePolicies& embcache_policies();

}  // namespace mlsim::embcache
