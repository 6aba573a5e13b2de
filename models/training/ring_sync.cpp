#include "models/training/ring_sync.hpp"

#include "sim_core/base/error.hpp"

namespace mlsim::training {

RingSync::RingSync(SyncSetup setup) : CollectiveSync(std::move(setup)) {
  MLSIM_CHECK(!options_.workers.empty(), "ring sync needs a worker");
}

void RingSync::start(std::size_t, const Chunk& c) {
  if (options_.workers.size() == 1) {  // nothing to reduce with
    engine_.schedule_in(Time::zero(), [this, c] { events_.on_chunk(0, c, true, true); });
    return;
  }
  const std::uint32_t slot = slots_.reserve(c);
  const collectives::CollectiveSpec spec = chunk_spec(collectives::Algorithm::kRing, c);
  auto& collective = slots_[slot].collective;
  collective = std::make_unique<collectives::Collective>(
      engine_, network_, options_.workers, spec,
      [this, slot](const collectives::CollectiveResult&) { done(slot); });
  collective->start();
}

void RingSync::done(std::uint32_t slot) {
  const Chunk chunk = slots_[slot].chunk;
  events_.on_chunk(0, chunk, true, true);
  slots_.retire(slot);
}

}  // namespace mlsim::training
