#include "models/training/all_reduce_sync.hpp"

#include "sim_core/base/error.hpp"

namespace mlsim::training {

AllReduceSync::AllReduceSync(SyncSetup setup, collectives::Algorithm algorithm)
    : CollectiveSync(std::move(setup), 1), algorithm_(algorithm) {
  MLSIM_CHECK(!options_.workers.empty(), "all-reduce sync needs a worker");
  MLSIM_CHECK(algorithm_ != collectives::Algorithm::kRat || options_.links != nullptr,
              "rat sync needs the link conditions (SyncOptions::links) to plan with");
}

void AllReduceSync::start(std::size_t, const Chunk& c) {
  if (options_.workers.size() == 1) {  // nothing to reduce with
    engine_.schedule_in(Time::zero(), [this, c] { events_.on_chunk(0, c, true, true); });
    return;
  }
  start_chunk_collective(
      slots_.at(c.layer, c.index), c, [&] { return chunk_spec(algorithm_, c); },
      [this, layer = c.layer, index = c.index](const collectives::CollectiveResult&) {
        done(layer, index);
      });
}

void AllReduceSync::done(std::uint32_t layer, std::uint32_t index) {
  events_.on_chunk(0, slots_.at(layer, index).chunk, true, true);
}

}  // namespace mlsim::training
