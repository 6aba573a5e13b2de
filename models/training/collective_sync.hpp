#pragma once
// What the strategies that move their bytes through sim_core/collectives share: the engine,
// network and options they were built with, one send clock per host for all their collectives
// (message_overhead is paid one message after another per host), the chunks' collectives and
// the traffic totals.
#include "models/training/chunk_collectives.hpp"
#include "models/training/sync_setup.hpp"
#include "sim_core/base/error.hpp"
#include "sim_core/collectives/host_send_clock.hpp"

namespace mlsim::training {

class CollectiveSync : public GradientSync {
 public:
  std::int64_t bytes_sent() const override { return slots_.bytes_sent(); }
  std::int64_t bytes_delivered() const override { return slots_.bytes_delivered(); }
  std::uint64_t messages() const override { return slots_.messages(); }
  std::uint64_t failed_transfers() const override { return slots_.failed_transfers(); }

 protected:
  CollectiveSync(SyncSetup setup, std::uint32_t copies)
      : engine_(setup.engine),
        network_(setup.network),
        events_(setup.events),
        options_(std::move(setup.options)),
        slots_(copies) {
    options_.host.send_clock = &clock_;
  }
  // Reports the collective's first failed transfer as the strategy's (GradientSync::failed).
  void watch(collectives::Collective& c) {
    c.set_failure_callback([this](const collectives::CollectiveResult&) { report_failure(); });
  }
  // Starts slot `e`'s collective for chunk `c`. The collective of the chunk's last round is kept
  // and rearmed while the chunk's size is unchanged; after a partition change (applied to the
  // gradients cut afterwards) it is rebuilt from `make_spec()`, calling `on_done` when it ends.
  template <class MakeSpec>
  void start_chunk_collective(ChunkCollectives::Entry& e, const Chunk& c, MakeSpec&& make_spec,
                              collectives::Collective::DoneCallback on_done) {
    if (e.collective) {
      MLSIM_CHECK(e.collective->done(), "a chunk's collective started again before it finished");
      if (e.chunk.parameters != c.parameters || !e.collective->rearm()) slots_.drop(e);
    }
    if (!e.collective) {
      e.chunk = c;
      e.collective = std::make_unique<collectives::Collective>(
          engine_, network_, options_.workers, make_spec(), std::move(on_done), options_.links);
      watch(*e.collective);
    }
    e.collective->start();
  }
  // A spec for one chunk's all-reduce with `algorithm`: its bytes, the options' window, costs
  // and flow label (no window, no costs, label 0 by default).
  collectives::CollectiveSpec chunk_spec(collectives::Algorithm algorithm, const Chunk& c) const {
    collectives::CollectiveSpec spec;
    spec.operation = collectives::Operation::kAllReduce;
    spec.algorithm = algorithm;
    spec.bytes = Bytes{c.parameters * options_.bytes_per_parameter};
    spec.element_bytes = options_.bytes_per_parameter;
    spec.window = options_.window;
    spec.host = options_.host;
    spec.costs = options_.costs;
    spec.flow_label = options_.flow_label;
    return spec;
  }

  Engine& engine_;
  Network& network_;
  SyncEvents& events_;
  SyncOptions options_;
  collectives::HostSendClock clock_;
  ChunkCollectives slots_;  // last: the collectives refer to clock_
};

}  // namespace mlsim::training
