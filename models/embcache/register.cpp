#include "models/embcache/register.hpp"

#include "models/embcache/embcache_model.hpp"

namespace mlsim {

void register_embcache(ModelRegistry& registry) {
  registry.add({"embcache",
                "Embedding-model training with GPU embedding caches and a parameter server: "
                "HET-style cache with eager sync against Herald's location-aware input "
                "allocation and on-demand sync",
                {"het", "herald"},
                [](ModelSetup& setup) { return embcache::make_embcache_model(setup); }});
}

}  // namespace mlsim
