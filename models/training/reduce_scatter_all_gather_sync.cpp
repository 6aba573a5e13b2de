#include "models/training/reduce_scatter_all_gather_sync.hpp"

#include "sim_core/base/error.hpp"

namespace mlsim::training {

ReduceScatterAllGatherSync::ReduceScatterAllGatherSync(SyncSetup setup)
    : CollectiveSync(std::move(setup), 2) {  // copy 0: reduce-scatter, copy 1: all-gather
  MLSIM_CHECK(!options_.workers.empty(), "reduce-scatter + all-gather sync needs a worker");
}

void ReduceScatterAllGatherSync::start(std::size_t, const Chunk& c) {
  if (options_.workers.size() == 1) {  // nothing to reduce with
    engine_.schedule_in(Time::zero(), [this, c] { events_.on_chunk(0, c, true, true); });
    return;
  }
  run(c, 0);
}

void ReduceScatterAllGatherSync::run(const Chunk& c, std::uint32_t phase) {
  start_chunk_collective(
      slots_.at(c.layer, c.index, phase), c,
      [&] {
        collectives::CollectiveSpec spec = chunk_spec(collectives::Algorithm::kRing, c);
        spec.operation = phase == 0 ? collectives::Operation::kReduceScatter
                                    : collectives::Operation::kAllGather;
        return spec;
      },
      [this, layer = c.layer, index = c.index, phase](const collectives::CollectiveResult&) {
        done(layer, index, phase);
      });
}

void ReduceScatterAllGatherSync::done(std::uint32_t layer, std::uint32_t index,
                                      std::uint32_t phase) {
  const Chunk c = slots_.at(layer, index, phase).chunk;
  if (phase == 0) {
    run(c, 1);  // every shard is reduced (and stepped): gather the updated parameters
    return;
  }
  events_.on_chunk(0, c, true, true);
}

}  // namespace mlsim::training
