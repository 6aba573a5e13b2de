#include "cli/registry.hpp"

#include "models/cluster/register.hpp"
#include "models/collectives/register.hpp"
#include "models/commsched/register.hpp"
#include "models/embcache/register.hpp"
#include "models/ina/register.hpp"
#include "models/llm_training/register.hpp"
#include "models/pipeline/register.hpp"
#include "models/serving/register.hpp"
#include "sim_core/network/network_factory.hpp"
#ifdef MLSIM_HAVE_SIMGRID
#include "sim_core/network/simgrid/simgrid_backend.hpp"
#endif
#ifdef MLSIM_HAVE_NS3
#include "sim_core/network/ns3/ns3_backend.hpp"
#endif

// Models: one include and one register call each (their library is linked in cli/CMakeLists.txt).

namespace mlsim {

Registries make_registries() {
  Registries r;
  register_core_backends(r.backends);
#ifdef MLSIM_HAVE_SIMGRID
  register_simgrid_backend(r.backends);
#endif
#ifdef MLSIM_HAVE_NS3
  register_ns3_backend(r.backends);
#endif
  register_collectives(r.models);
  register_commsched(r.models);
  register_ina(r.models);
  register_embcache(r.models);
  register_cluster(r.models);
  register_pipeline(r.models);
  register_serving(r.models);
  register_llm_training(r.models);
  return r;
}

}  // namespace mlsim
