#include "models/training/gradient_path.hpp"

#include <algorithm>

#include "sim_core/base/error.hpp"

namespace mlsim::training {

GradientPath::GradientPath(Engine& engine, GradientOwner& job, SchedulerFactory make_scheduler,
                           SchedulerConfig initial, bool record_trace)
    : engine_(engine),
      job_(job),
      make_scheduler_(std::move(make_scheduler)),
      initial_(initial),
      record_trace_(record_trace) {}

GradientPath::~GradientPath() {
  for (const auto& [seq, handle] : pending_) engine_.cancel(handle);
}

void GradientPath::set_ordering(Ordering ordering) {
  MLSIM_CHECK(sync_ == nullptr, "the ordering is set before the strategy");
  job_order_ = ordering == Ordering::kJob;
  scheduling_owners_.reset();
  if (ordering == Ordering::kRankZero) scheduling_owners_ = 1;
}

void GradientPath::set_sync(GradientSync* sync) {
  MLSIM_CHECK(sync_ == nullptr, "a gradient path feeds one strategy");
  sync_ = sync;
  per_worker_ = sync_->entry() == GradientSync::Entry::kPerWorker;
  MLSIM_CHECK(!job_order_ || per_worker_, "one order for the job needs a per-worker strategy");
  MLSIM_CHECK(!start_barrier_ || (per_worker_ && !job_order_),
              "a start barrier needs a per-worker strategy with a scheduler per worker");
  const std::size_t owners = per_worker_ && !job_order_ ? job_.gradient_workers() : 1;
  for (std::size_t i = 0; i < owners; ++i)
    schedulers_.push_back(make_scheduler_(
        SchedulerSetup{initial_, sync_->one_tensor_at_a_time(), fifo_engines_,
                       scheduling_owners_.has_value() && i >= *scheduling_owners_}));
  const std::size_t layers = job_.gradient_layers();
  // Per worker that receives chunks back (under kJob every worker, with one scheduler).
  chunks_left_.assign(per_worker_ ? job_.gradient_workers() : 1,
                      std::vector<std::uint32_t>(layers, 0));
  produced_.assign(layers, 0);
  sync_->set_partition(config().partition);
}

void GradientPath::set_config(const SchedulerConfig& config) {
  const std::int64_t before = this->config().partition;
  for (auto& s : schedulers_) s->set_config(config);
  if (this->config().partition != before) sync_->set_partition(this->config().partition);
}

void GradientPath::gradient_ready(std::size_t w, std::size_t layer) {
  std::size_t owner = w;
  if (!per_worker_ || job_order_) {
    // A worker produces layer l again only after its chunks of the last round are back, which
    // needs every worker's part: the count never mixes two rounds.
    if (++produced_[layer] < job_.gradient_workers()) return;
    produced_[layer] = 0;
    owner = 0;
  }
  CommScheduler& s = *schedulers_[owner];
  const auto chunks = partition_tensor(job_.layer_parameters(layer), s.partition());
  const auto count = static_cast<std::uint32_t>(chunks.size());
  if (job_order_) {
    for (auto& left : chunks_left_) left[layer] = count;
  } else {
    chunks_left_[owner][layer] = count;
  }
  for (std::size_t i = 0; i < chunks.size(); ++i)
    s.ready(Chunk{static_cast<std::uint32_t>(layer), static_cast<std::uint32_t>(i), chunks[i]});
  pump(owner);
}

void GradientPath::pump(std::size_t owner) {
  CommScheduler& s = *schedulers_[owner];
  while (auto chunk = s.next()) {
    if (start_barrier_) {
      auto& released = released_[{chunk->layer, chunk->index}];
      released.push_back(owner);
      if (released.size() < job_.gradient_workers()) continue;
      std::vector<std::size_t> workers = std::move(released);
      released_.erase({chunk->layer, chunk->index});
      std::sort(workers.begin(), workers.end());
      for (std::size_t w : workers) start_on(w, *chunk);
    } else if (job_order_) {
      record(ChunkEvent::Kind::kStart, owner, *chunk);
      // On every worker at once, in the scheduler's order.
      for (std::size_t w = 0; w < job_.gradient_workers(); ++w) sync_->start(w, *chunk);
    } else {
      start_on(owner, *chunk);
    }
  }
}

void GradientPath::start_on(std::size_t owner, const Chunk& c) {
  record(ChunkEvent::Kind::kStart, owner, c);
  sync_->start(owner, c);
}

void GradientPath::give_back(std::size_t owner, const Chunk& c) {
  schedulers_[owner]->completed(c);
  record(ChunkEvent::Kind::kComplete, owner, c);
}

void GradientPath::on_chunk(std::size_t owner, const Chunk& c, bool release, bool arrived) {
  // kJob: the one scheduler is worker 0's; its credit returns when worker 0 has the chunk.
  if (job_order_ && owner != 0) release = false;
  last_event_ = engine_.now();
  const bool delayed = release && credit_delay_ > Time::zero();
  if (delayed) {
    const std::uint64_t seq = next_pending_++;
    pending_[seq] = engine_.schedule_in(credit_delay_, [this, seq, owner, c] {
      pending_.erase(seq);
      give_back(owner, c);
      pump(owner);
      job_.check_progress();
    });
  } else if (release) {
    give_back(owner, c);
  }
  if (arrived && --chunks_left_[owner][c.layer] == 0) {
    if (per_worker_) {
      job_.parameters_back(owner, c.layer);
    } else {
      for (std::size_t v = 0; v < job_.gradient_workers(); ++v) job_.parameters_back(v, c.layer);
    }
  }
  if (release && !delayed) pump(owner);
  job_.check_progress();
}

void GradientPath::record(ChunkEvent::Kind kind, std::size_t owner, const Chunk& c) {
  if (!record_trace_) return;
  trace_.push_back(ChunkEvent{kind, engine_.now(), owner, job_.updates(owner, c.layer), c,
                              schedulers_[owner]->credit_left()});
}

}  // namespace mlsim::training
