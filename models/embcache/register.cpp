#include "models/embcache/register.hpp"

#include "models/embcache/embcache_model.hpp"
#include "models/embcache/policies.hpp"

namespace mlsim {

void register_embcache(ModelRegistry& registry) {
  registry.add({"embcache",
                "Embedding-model training with GPU embedding caches and a parameter server: "
                "HET-style cache with eager sync against Herald's location-aware input "
                "allocation and on-demand sync",
                embcache::embcache_policies().describe(),
                [](ModelSetup& setup) { return embcache::make_embcache_model(setup); }});
}

}  // namespace mlsim
