#include "models/training/closed_form_sync.hpp"

#include <algorithm>

#include "sim_core/base/error.hpp"
#include "sim_core/collectives/intra_host.hpp"

namespace mlsim::training {

ClosedFormSync::ClosedFormSync(SyncSetup setup, std::vector<collectives::Operation> operations)
    : engine_(setup.engine),
      events_(setup.events),
      options_(std::move(setup.options)),
      operations_(std::move(operations)) {
  MLSIM_CHECK(!options_.workers.empty(), "closed-form sync needs a worker");
  MLSIM_CHECK(!operations_.empty(), "closed-form sync needs a collective");
  MLSIM_CHECK(options_.links != nullptr,
              "closed-form sync needs the link conditions (SyncOptions::links) to price routes");
  closed_form_ =
      std::make_unique<collectives::InterHostClosedForm>(*options_.links, options_.costs);
}

void ClosedFormSync::start(std::size_t, const Chunk& c) {
  if (options_.workers.size() == 1) {  // nothing to reduce with
    engine_.schedule_in(Time::zero(), [this, c] { events_.on_chunk(0, c, true, true); });
    return;
  }
  run(c, 0);
}

void ClosedFormSync::run(const Chunk& c, std::size_t step) {
  const auto& w = options_.workers;
  const int participants = static_cast<int>(w.size());
  const Bytes bytes{c.parameters * options_.bytes_per_parameter};
  const bool one_host = options_.hardware != nullptr &&
                        std::all_of(w.begin(), w.end(), [&](NodeId h) { return h == w.front(); });
  const Time t = one_host ? collectives::intra_host_collective_time(
                                options_.costs, operations_[step], participants, bytes,
                                options_.hardware->host(w.front()))
                          : closed_form_->time(operations_[step], participants, bytes, w,
                                               options_.host_link_sharers);
  engine_.schedule_in(t, [this, c, step] {
    if (step + 1 < operations_.size())
      run(c, step + 1);
    else
      events_.on_chunk(0, c, true, true);
  });
}

}  // namespace mlsim::training
