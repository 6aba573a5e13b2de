#include "models/cluster/register.hpp"

#include "models/cluster/cluster_model.hpp"
#include "models/cluster/policies.hpp"

namespace mlsim {

void register_cluster(ModelRegistry& registry) {
  registry.add({"cluster",
                "Shared GPU-cluster scheduling on a heterogeneous node pool from a job trace: "
                "strict FCFS, EASY backfill, and SING-like fair-share ordering, flexible GPU "
                "types and pre-initialised environments; node failures",
                cluster::cluster_policies().describe(),
                [](ModelSetup& setup) { return cluster::make_cluster_model(setup); }});
}

}  // namespace mlsim
