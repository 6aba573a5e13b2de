#include "models/serving/replica.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "models/serving/transformer_cost.hpp"
#include "sim_core/base/error.hpp"

namespace mlsim::serving {

Replica::Replica(Engine& engine, Compute& compute, ReplicaConfig config,
                 std::unique_ptr<IterationCostModel> cost, KvBlockPool kv,
                 std::vector<std::int32_t> exit_layers, std::int32_t feature_layers,
                 BatchLimits limits, std::unique_ptr<BatchScheduler> scheduler,
                 ReplicaObserver& observer, PointToPoint* transfers)
    : engine_(engine),
      compute_(compute),
      config_(std::move(config)),
      cost_(std::move(cost)),
      kv_(kv),
      scheduler_(std::move(scheduler)),
      observer_(observer),
      transfers_(transfers) {
  MLSIM_CHECK(config_.tp == cost_->tp(), "replica and cost model disagree on tp");
  if (!config_.stage_workers.empty()) {
    // An elastic deployment's front replica: the workers are the deployment's.
    stages_ = config_.stage_workers;
    config_.stage_layers.clear();
    for (const StageWorker* w : stages_)
      config_.stage_layers.push_back(w->last_layer - w->first_layer);
  }
  if (config_.stage_layers.empty()) config_.stage_layers = {cost_->model().layers};
  const auto pp = config_.stage_layers.size();
  MLSIM_CHECK(std::accumulate(config_.stage_layers.begin(), config_.stage_layers.end(), 0) ==
                  cost_->model().layers,
              "the stages' layers sum to the model's depth");
  MLSIM_CHECK(pp == 1 || transfers_ != nullptr, "a pipeline sends activations between stages");
  if (stages_.empty()) {
    MLSIM_CHECK(config_.gpus.size() == pp * static_cast<std::size_t>(config_.tp),
                "a replica names the host of each of its GPUs");
    std::int32_t layer = 0;
    for (std::size_t s = 0; s < pp; ++s) {
      auto st = std::make_unique<StageWorker>();
      st->stage = static_cast<int>(s);
      st->first_layer = layer;
      layer += config_.stage_layers[s];
      st->last_layer = layer;
      MLSIM_CHECK(st->last_layer > st->first_layer, "a stage has at least one layer");
      for (int g = 0; g < config_.tp; ++g) {
        const NodeId h = config_.gpus[s * static_cast<std::size_t>(config_.tp) + g];
        if (std::find(st->hosts.begin(), st->hosts.end(), h) == st->hosts.end())
          st->hosts.push_back(h);
      }
      st->nominal.resize(st->hosts.size());
      stages_.push_back(st.get());
      own_stages_.push_back(std::move(st));
    }
  }
  for (std::size_t s = 0; s < pp; ++s)
    MLSIM_CHECK(stages_[s]->stage == static_cast<int>(s),
                "a path has one worker per stage, in order");
  const auto virtual_engines =
      config_.virtual_engines > 0 ? static_cast<std::size_t>(config_.virtual_engines) : pp;
  engines_.reserve(virtual_engines);
  for (std::size_t v = 0; v < virtual_engines; ++v) {
    engines_.emplace_back(ReplicaState(kv_, exit_layers, feature_layers, limits));
    engines_.back().path = stages_;
  }
  kv_usage_.set(engine_.now(), 0);
  if (config_.prefix_block_tokens > 0) {
    const std::int32_t bt = config_.prefix_block_tokens;
    MLSIM_CHECK(pp == 1, "prefix caching with pipeline stages is not modelled");
    MLSIM_CHECK(bt % kv_.block_tokens() == 0, "prefix blocks must be whole KV blocks");
    auto& state = engines_.front().state;
    state.enable_prefix_cache(bt, kv_.blocks_for(bt, state.depth()));
  }
}

void ReplicaObserver::on_prefill_done(Replica&, Request&) {
  MLSIM_CHECK(false, "a prefill replica's observer must take its handed-off requests");
}

Replica::VirtualEngine& Replica::least_loaded_engine() {
  // vLLM v0: the virtual engine with the fewest unfinished requests (the first on a tie).
  VirtualEngine* target = &engines_.front();
  if (engines_.size() > 1) {
    auto load = [](const VirtualEngine& v) {
      return v.state.waiting().size() + v.state.running().size();
    };
    for (auto& v : engines_)
      if (load(v) < load(*target)) target = &v;
  }
  return *target;
}

void Replica::schedule_start() {
  // Start on an event of its own at the current time, so that requests arriving at the same
  // instant join the same batch.
  if (!start_pending_ && !all_in_flight()) {
    start_pending_ = true;
    engine_.schedule_in(Time::zero(), [this] {
      start_pending_ = false;
      try_start();
    });
  }
}

bool Replica::reserve_incoming(Request& r) {
  const std::int32_t layers = exit_layer(r.tier);
  MLSIM_CHECK(r.incoming_kv_blocks == 0, "KV already reserved for this request");
  if (!kv_.resize(r.incoming_kv_blocks, kv_.blocks_for(incoming_tokens(r), layers))) return false;
  kv_usage_.set(engine_.now(), static_cast<double>(kv_.used()));
  observer_.on_kv_changed(*this);
  return true;
}

void Replica::accept_decode(Request& r) {
  MLSIM_CHECK(r.kv_blocks == 0 && !r.in_prefill() && !r.done(),
              "a handed-off request arrives with its prefill done and its old KV released");
  VirtualEngine& v = least_loaded_engine();
  r.kv_layers = exit_layer(r.tier);
  r.kv_blocks = r.incoming_kv_blocks;
  r.incoming_kv_blocks = 0;
  r.replica = config_.index;
  v.state.running().push_back(&r);
  v.state.add_outstanding_tokens(r.outstanding_tokens());
  schedule_start();
}

void Replica::release_handed_off(Request& r) {
  (void)kv_.resize(r.kv_blocks, 0);
  kv_usage_.set(engine_.now(), static_cast<double>(kv_.used()));
  observer_.on_kv_changed(*this);
  // Requests waiting here for KV may fit now (an idle replica would not look again otherwise).
  if (waiting_count() > 0) schedule_start();
}

std::size_t Replica::waiting_count() const {
  std::size_t n = 0;
  for (const auto& v : engines_) n += v.state.waiting().size();
  return n;
}

std::int64_t Replica::outstanding_tokens() const {
  std::int64_t n = 0;
  for (const auto& v : engines_) n += v.state.outstanding_tokens();
  return n;
}

bool Replica::all_in_flight() const {
  return std::all_of(engines_.begin(), engines_.end(),
                     [](const VirtualEngine& v) { return v.in_flight; });
}

bool Replica::busy() const {
  return std::any_of(engines_.begin(), engines_.end(),
                     [](const VirtualEngine& v) { return v.in_flight; });
}

double Replica::busy_seconds() const {
  double s = 0;
  for (const auto* st : stages_) s += st->busy_s;
  return s / static_cast<double>(stages_.size());
}

std::uint64_t Replica::preemptions() const {
  std::uint64_t n = 0;
  for (const auto& v : engines_) n += v.state.preemptions();
  return n;
}

void Replica::submit(Request& r) {
  VirtualEngine& ve = least_loaded_engine();
  if (binder_ != nullptr) {
    const auto v = static_cast<std::uint32_t>(&ve - engines_.data());
    if (engine_idle(v)) binder_->bind_idle_engine(*this, v);
  }
  ReplicaState& state = ve.state;
  if (!state.fits_at_all(r)) {
    observer_.on_dropped(*this, r);
    return;
  }
  r.prefill_target = r.spec.prompt_tokens;
  r.cached = 0;
  r.generated = 0;
  r.answer_start = engine_.now();
  state.waiting().push_back(&r);
  state.add_outstanding_tokens(r.outstanding_tokens());
  schedule_start();
}

void Replica::try_start() {
  if (!active_) return;
  bool scheduled = false;
  for (std::uint32_t v = 0; v < engines_.size(); ++v) {
    VirtualEngine& ve = engines_[v];
    if (ve.in_flight || ve.migrating_to != nullptr) continue;
    scheduler_->next_batch(ve.state, ve.batch);
    scheduled = true;
    if (ve.batch.empty()) continue;
    set_in_flight(ve, true);
    ve.started = engine_.now();
    ve.path.front()->queue.push_back({this, v, ve.epoch});
  }
  if (scheduled) {
    kv_usage_.set(engine_.now(), static_cast<double>(kv_.used()));
    observer_.on_kv_changed(*this);
  }
  StageWorker& front = *stages_.front();
  if (!front.busy) run_next(front);
}

void Replica::set_in_flight(VirtualEngine& ve, bool in_flight) {
  if (ve.in_flight == in_flight) return;
  ve.in_flight = in_flight;
  if (in_flight) {
    if (in_flight_count_++ == 0) polling_since_ = engine_.now();
  } else if (--in_flight_count_ == 0 && config_.polls) {
    polling_s_ += (engine_.now() - polling_since_).seconds();
  }
}

void Replica::run_next(StageWorker& w) {
  while (!w.busy && !w.queue.empty()) {
    const StageJob job = w.queue.front();
    if (job.replica->engines_[job.engine].epoch == job.epoch) {
      job.replica->run_job(w);
      return;
    }
    // The engine was reset since this micro-batch was queued: it is dropped.
    w.queue.pop_front();
    ++job.replica->lost_micro_batches_;
  }
}

void Replica::run_job(StageWorker& w) {
  w.current = w.queue.front();
  w.queue.pop_front();
  w.busy = true;
  w.started = engine_.now();
  const Batch& batch = engines_[w.current.engine].batch;
  const IterationCostModel& cost = w.cost != nullptr ? *w.cost : *cost_;
  const IterationCost c = cost.cost(batch.items, w.first_layer, w.last_layer);
  w.allreduce = c.allreduce + c.moe_collectives;
  alltoall_bytes_ += c.alltoall_bytes;
  moe_routed_pairs_ += c.moe_routed_pairs;
  moe_dropped_pairs_ += c.moe_dropped_pairs;
  // The framework's per-iteration overhead (scheduling, input preparation) before the first stage.
  double host_seconds = 0;
  if (w.stage == 0) {
    host_seconds = config_.iteration_overhead.seconds();
    if (!config_.multi_level_sampling && c.exits_sampled > 1)
      host_seconds += (c.exits_sampled - 1) * config_.sampling_pass_overhead.seconds();
    // MultiWorld: the serving coroutine resumes to launch the micro-batch after one round of the
    // event loop, in which every other engine in flight polls its pending send or result once
    // (communicator.py, WorldCommunicator._wait_work: is_completed(), then asyncio.sleep(0)).
    if (config_.poll_step > Time::zero() && in_flight_count_ > 1)
      host_seconds += config_.poll_step.seconds() * (in_flight_count_ - 1);
  }
  std::fill(w.nominal.begin(), w.nominal.end(), c.compute_s);
  compute_.run_for(
      w.hosts, w.nominal,
      [this, &w, e = w.epoch] {
        if (w.epoch == e) on_stage_compute_done(w);
      },
      host_seconds);
}

void Replica::on_stage_compute_done(StageWorker& w) {
  // The stage's tensor-parallel all-reduces (and a MoE model's expert-parallel all-to-alls and
  // all-gathers), one after another after the compute (Megatron TP puts them on the critical
  // path), each costed by the collective layer for its size.
  const Time allreduce = w.allreduce;
  if (allreduce == Time::zero()) {
    on_stage_done(w);
    return;
  }
  engine_.schedule_in(allreduce, [this, &w, e = w.epoch] {
    if (w.epoch == e) on_stage_done(w);
  });
}

void Replica::set_trace(SpanTrace* trace) {
  trace_ = trace;
  if (!trace_) return;
  const auto process = static_cast<std::uint32_t>(config_.index);
  trace_->name_process(process, "replica " + config_.name);
  for (std::size_t s = 0; s < stages_.size(); ++s)
    trace_->name_thread(process, static_cast<std::uint32_t>(s), fmt::format("stage {}", s));
}

void Replica::on_stage_done(StageWorker& w) {
  const StageJob job = w.current;
  const bool stale = engines_[job.engine].epoch != job.epoch;
  if (trace_ && !stale) {
    const Batch& batch = engines_[job.engine].batch;
    std::size_t decodes = 0;
    for (const WorkItem& item : batch.items) decodes += item.decode ? 1 : 0;
    const char* kind = decodes == batch.items.size() ? "decode"
                       : decodes == 0                ? "prefill"
                                                     : "mixed";
    trace_->span(kind, "iteration", w.started, engine_.now(),
                 static_cast<std::uint32_t>(config_.index), static_cast<std::uint32_t>(w.stage),
                 fmt::format(R"({{"requests":{},"tokens":{},"decodes":{}}})", batch.items.size(),
                             batch.tokens, decodes));
  }
  w.busy = false;
  w.busy_s += (engine_.now() - w.started).seconds();
  if (stale)
    ++lost_micro_batches_;
  else if (static_cast<std::size_t>(w.stage) + 1 == engines_[job.engine].path.size())
    complete_iteration(job.engine);
  else
    forward(w, job.engine);
  if (!w.busy) run_next(w);
}

void Replica::forward(StageWorker& w, std::uint32_t v) {
  // The hidden states of the batch's tokens, from stage s's GPUs to the next stage's.
  const Bytes bytes{engines_[v].batch.tokens * cost_->model().hidden *
                    cost_->model().dtype_bytes()};
  activation_bytes_ += bytes.count;
  StageWorker& to = *engines_[v].path[static_cast<std::size_t>(w.stage) + 1];
  if (config_.polls) {
    if (w.sends_epoch != w.epoch) {
      w.sends_epoch = w.epoch;
      w.sends_in_flight = 0;
    }
    ++w.sends_in_flight;
  }
  transfers_->send(w.hosts.front(), to.hosts.front(), bytes, config_.host_link,
                   [this, &w, &to, v, we = to.epoch, ve = engines_[v].epoch, se = w.epoch] {
                     if (config_.polls && w.epoch == se) --w.sends_in_flight;
                     // MultiWorld: the receiver notices the completion at its coroutine's next
                     // poll, a round of its event loop later: one poll per operation pending
                     // there (a receive per upstream world, its own sends).
                     Time delay = config_.send_overhead;
                     if (config_.poll_step > Time::zero())
                       delay += config_.poll_step * (to.posted_recvs + to.sends());
                     if (delay == Time::zero()) {
                       arrive_at_stage(to, v, we, ve);
                       return;
                     }
                     engine_.schedule_in(
                         delay, [this, &to, v, we, ve] { arrive_at_stage(to, v, we, ve); });
                   });
}

void Replica::arrive_at_stage(StageWorker& w, std::uint32_t v, std::uint32_t worker_epoch,
                              std::uint32_t engine_epoch) {
  if (w.epoch != worker_epoch || !w.alive || engines_[v].epoch != engine_epoch) {
    // Sent to a worker that failed meanwhile (its receive never completes), or the engine was
    // reset: dropped; the engine waits for the failure to be detected.
    ++lost_micro_batches_;
    return;
  }
  w.queue.push_back({this, v, engine_epoch});
  if (!w.busy) run_next(w);
}

template <typename Change>
void Replica::change_path(std::uint32_t v, Change&& change) {
  if (binder_ == nullptr) {
    change();
    return;
  }
  const std::size_t stages = engines_[v].path.size();
  std::vector<StageWorker*> before(stages);
  for (std::size_t s = 1; s < stages; ++s) before[s] = planned_path(v, s);
  change();
  for (std::size_t s = 1; s < stages; ++s) {
    StageWorker* now = planned_path(v, s);
    if (now != before[s]) binder_->path_changed(*this, v, *before[s], *now);
  }
}

void Replica::bind(std::uint32_t v, StageWorker& worker) {
  change_path(v, [&] { engines_[v].path[static_cast<std::size_t>(worker.stage)] = &worker; });
}

std::int64_t Replica::engine_recompute_tokens(std::uint32_t v) const {
  // As ReplicaState::preempt: the prefill target becomes prompt + generated with nothing cached.
  std::int64_t tokens = 0;
  for (const Request* r : engines_[v].state.running())
    tokens += std::int64_t{r->spec.prompt_tokens} + r->generated -
              std::max(0, r->prefill_target - r->cached);
  return tokens;
}

std::size_t Replica::reset_engine(std::uint32_t v) {
  VirtualEngine& ve = engines_[v];
  ve.epoch += 1;
  // A KV migration in progress is void: its KV is lost with the rest (its `done` never runs).
  change_path(v, [&] { ve.migrating_to = nullptr; });
  ve.migration_sending = false;
  ve.migrated = nullptr;
  ve.migration += 1;
  set_in_flight(ve, false);
  ve.batch.clear();
  auto& running = ve.state.running();
  const std::size_t n = running.size();
  // From the back, so that the waiting queue keeps their order at its front.
  while (!running.empty()) ve.state.preempt(*running.back());
  kv_usage_.set(engine_.now(), static_cast<double>(kv_.used()));
  observer_.on_kv_changed(*this);
  schedule_start();
  return n;
}

void Replica::evacuate(std::vector<Request*>& out) {
  for (std::uint32_t v = 0; v < engines_.size(); ++v) {
    VirtualEngine& ve = engines_[v];
    ve.epoch += 1;
    change_path(v, [&] { ve.migrating_to = nullptr; });
    ve.migration_sending = false;
    ve.migrated = nullptr;
    ve.migration += 1;
    set_in_flight(ve, false);
    ve.batch.clear();
    for (Request* r : ve.state.running()) {
      ve.state.release(*r);
      out.push_back(r);
    }
    for (Request* r : ve.state.waiting()) {
      ve.state.release(*r);
      out.push_back(r);
    }
    ve.state.running().clear();
    ve.state.waiting().clear();
    ve.state.add_outstanding_tokens(-ve.state.outstanding_tokens());
  }
  kv_usage_.set(engine_.now(), static_cast<double>(kv_.used()));
  observer_.on_kv_changed(*this);
}

void Replica::set_active(bool active) {
  active_ = active;
  if (active_) schedule_start();
}

void Replica::submit_recompute(Request& r) {
  if (r.generated == 0) {
    // Nothing generated yet: a fresh start is the same recompute.
    submit(r);
    return;
  }
  VirtualEngine& ve = least_loaded_engine();
  if (binder_ != nullptr) {
    const auto v = static_cast<std::uint32_t>(&ve - engines_.data());
    if (engine_idle(v)) binder_->bind_idle_engine(*this, v);
  }
  if (!ve.state.fits_at_all(r)) {
    observer_.on_dropped(*this, r);
    return;
  }
  r.prefill_target = r.spec.prompt_tokens + r.generated;
  r.cached = 0;
  r.reused_layers = 0;
  ve.state.waiting().push_back(&r);
  ve.state.add_outstanding_tokens(r.outstanding_tokens());
  schedule_start();
}

void Replica::complete_iteration(std::uint32_t v) {
  VirtualEngine& ve = engines_[v];
  ReplicaState& state = ve.state;
  Batch& batch = ve.batch;
  const Time now = engine_.now();
  iterations_ += 1;
  tokens_processed_ += static_cast<std::uint64_t>(batch.tokens);
  auto& running = state.running();
  bool any_done = false;
  for (auto& e : batch.entries) {
    Request& r = *e.request;
    const std::int64_t before = r.outstanding_tokens();
    if (r.admitted == Time::max()) r.admitted = ve.started;
    r.cached += e.work.tokens;
    if (e.work.samples) r.generated += 1;
    state.add_outstanding_tokens(r.outstanding_tokens() - before);
    // A completed prefill hands its full prompt blocks to the prefix cache (when on).
    if (e.work.samples && !e.work.decode) state.publish_prefix(r);
    if (!e.work.samples) continue;
    if (r.first_token == Time::max()) {
      r.first_token = now;
      observer_.on_first_token(*this, r);
    }
    if (r.done()) any_done = true;
  }
  if (config_.hand_off_after_prefill) {
    // Disaggregation: a request whose prefill just sampled its first token (and that wants more)
    // leaves for a decode replica; its KV stays here until the transfer is done.
    std::vector<Request*> handed_off;
    for (auto& e : batch.entries)
      if (e.work.samples && !e.work.decode && !e.request->done()) handed_off.push_back(e.request);
    if (!handed_off.empty()) {
      for (Request* r : handed_off) {
        running.erase(std::find(running.begin(), running.end(), r));
        state.add_outstanding_tokens(-r->outstanding_tokens());
      }
      for (Request* r : handed_off) observer_.on_prefill_done(*this, *r);
    }
  }
  if (any_done) {
    // Collect first, then finish: finishing may re-queue (escalation) and touch `running`.
    std::vector<Request*> done;
    for (auto& e : batch.entries)
      if (e.work.samples && e.request->done()) done.push_back(e.request);
    running.erase(
        std::remove_if(running.begin(), running.end(), [](const Request* r) { return r->done(); }),
        running.end());
    for (Request* r : done) finish_answer(state, *r);
  }
  set_in_flight(ve, false);
  last_batch_ = &batch;
  observer_.on_iteration(*this);
  batch.clear();
  if (ve.migrating_to != nullptr && !ve.migration_sending) start_migration(v);
  if (binder_ != nullptr) binder_->engine_settled(*this, v);
  try_start();
}

void Replica::migrate_engine(std::uint32_t v, StageWorker& worker,
                             std::function<void(std::int64_t)> done) {
  VirtualEngine& ve = engines_[v];
  MLSIM_CHECK(ve.migrating_to == nullptr, "one KV migration at a time per engine");
  MLSIM_CHECK(worker.stage > 0 && static_cast<std::size_t>(worker.stage) < ve.path.size(),
              "a KV migration moves a later stage's worker");
  change_path(v, [&] { ve.migrating_to = &worker; });
  ve.migrated = std::move(done);
  ve.migration += 1;
  if (!ve.in_flight) start_migration(v);
}

void Replica::cancel_migration(std::uint32_t v) {
  VirtualEngine& ve = engines_[v];
  if (ve.migrating_to == nullptr) return;
  change_path(v, [&] { ve.migrating_to = nullptr; });
  ve.migration_sending = false;
  ve.migrated = nullptr;
  ve.migration += 1;
  schedule_start();
}

void Replica::start_migration(std::uint32_t v) {
  VirtualEngine& ve = engines_[v];
  ve.migration_sending = true;
  StageWorker& to = *ve.migrating_to;
  const StageWorker& from = *ve.path[static_cast<std::size_t>(to.stage)];
  // The KV of the running requests' computed tokens in the stage's layers (the waiting ones hold
  // none: new, or rewound to recompute).
  std::int64_t tokens = 0;
  for (const Request* r : ve.state.running()) tokens += r->cached;
  const std::int64_t bytes =
      tokens * cost_->model().kv_bytes_per_token_layer() * (to.last_layer - to.first_layer);
  auto finish = [this, v, migration = ve.migration, bytes] {
    VirtualEngine& e = engines_[v];
    if (e.migration != migration) return;  // reset or cancelled meanwhile: void
    // The planned worker does not change: it was the destination already.
    StageWorker& target = *e.migrating_to;
    e.migrating_to = nullptr;
    e.migration_sending = false;
    e.path[static_cast<std::size_t>(target.stage)] = &target;
    auto done = std::move(e.migrated);
    e.migrated = nullptr;
    if (done) done(bytes);
    schedule_start();
  };
  if (bytes == 0 || &from == &to) {
    engine_.schedule_in(Time::zero(), std::move(finish));
    return;
  }
  // The TP group's shards move in parallel, one GPU pair each.
  transfers_->send(from.hosts.front(), to.hosts.front(), Bytes{bytes}, config_.host_link,
                   std::move(finish), config_.tp);
}

void Replica::finish_answer(ReplicaState& state, Request& r) {
  bool escalate_here = r.spec.escalate_to >= 0 && !r.escalated && config_.reuse_across_tiers &&
                       state.serves(r.spec.escalate_to) && r.spec.escalate_to > r.tier;
  if (escalate_here) {
    // An answer at the larger tier that could never fit the pool goes back to the system, which
    // re-submits it and has it reported dropped.
    Request probe = r;
    probe.tier = r.spec.escalate_to;
    escalate_here = state.fits_at_all(probe);
  }
  state.add_outstanding_tokens(-r.outstanding_tokens());  // zero: the answer is complete
  if (!escalate_here) {
    state.release(r);
    observer_.on_answer_done(*this, r);
    return;
  }
  // Keep the prompt's KV in the lower tier's layers (and drop the KV of the answer's tokens);
  // the escalated answer prefills the prompt only above those layers, from the stored features.
  const std::int32_t lower = state.exit_layer(r.tier);
  (void)kv_.resize(r.kv_blocks, kv_.blocks_for(r.spec.prompt_tokens, lower));
  (void)kv_.resize(r.feature_blocks, 0);
  r.tier = r.spec.escalate_to;
  r.escalated = true;
  r.reused_layers = lower;
  r.prefill_target = r.spec.prompt_tokens;
  r.cached = 0;
  r.generated = 0;
  r.answer_start = engine_.now();
  state.waiting().push_front(&r);
  state.add_outstanding_tokens(r.outstanding_tokens());
}

}  // namespace mlsim::serving
