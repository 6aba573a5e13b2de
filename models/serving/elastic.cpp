#include "models/serving/elastic.hpp"

#include <algorithm>
#include <limits>

#include "sim_core/base/error.hpp"

namespace mlsim::serving {
namespace {

// Workers placed per stage (the boundary routers' sizes).
std::vector<int> placed_workers(const ElasticConfig& config) {
  std::vector<int> n;
  for (const auto& s : config.stages) n.push_back(s.max_replicas);
  return n;
}

}  // namespace

int ElasticDeployment::virtual_engines(const ElasticConfig& config) {
  if (config.virtual_engines > 0) return config.virtual_engines;
  // Enough micro-batches in flight for every worker of the widest stage to have one per front
  // replica's share, times the pipeline's depth (vLLM v0 keeps pp micro-batches in a pipeline).
  const int front = std::max(1, config.stages.front().max_replicas);
  int widest = 1;
  for (const auto& s : config.stages) widest = std::max(widest, s.max_replicas);
  return static_cast<int>(config.stages.size()) * ((widest + front - 1) / front);
}

ElasticDeployment::ElasticDeployment(Engine& engine, ElasticConfig config,
                                     std::vector<std::vector<std::unique_ptr<StageWorker>>> workers,
                                     std::vector<Replica*> front, std::vector<double> weight_bytes,
                                     int gpus_per_worker, ElasticHost& host, Time series_interval)
    : engine_(engine),
      config_(std::move(config)),
      owned_(std::move(workers)),
      front_(std::move(front)),
      routers_(config_.routing, placed_workers(config_)),
      weight_bytes_(std::move(weight_bytes)),
      gpus_per_worker_(gpus_per_worker),
      host_(host),
      series_interval_(series_interval) {
  MLSIM_CHECK(owned_.size() == config_.stages.size() && weight_bytes_.size() == owned_.size(),
              "one worker list and weight size per stage");
  MLSIM_CHECK(front_.size() == owned_.front().size(), "one front replica per stage-0 worker");
  workers_.resize(owned_.size());
  for (std::size_t s = 0; s < owned_.size(); ++s) {
    MLSIM_CHECK(static_cast<int>(owned_[s].size()) == config_.stages[s].max_replicas,
                "max_replicas workers per stage");
    for (auto& w : owned_[s]) {
      Worker k;
      k.w = w.get();
      k.stage = static_cast<int>(s);
      k.index = static_cast<int>(workers_[s].size());
      w->index = k.index;
      workers_[s].push_back(k);
    }
  }
  for (Replica* r : front_) {
    r->set_binder(this);
    r->set_work_listener(this, static_cast<std::uint32_t>(engine_slots_.size()));
    for (std::uint32_t v = 0; v < r->virtual_engines(); ++v) {
      engine_slots_.emplace_back(r, v);
      for (std::size_t s = 1; s < owned_.size(); ++s)
        routers_.engine_moved(static_cast<int>(s), -1, r->planned_path(v, s)->index,
                              r->engine_outstanding_tokens(v));
    }
  }
}

void ElasticDeployment::set_state(Worker& k, State state) {
  k.state = state;
  if (k.stage > 0) routers_.set_live(k.stage, k.index, state == State::kLive);
  refresh_polling();
}

void ElasticDeployment::refresh_polling() {
  if (!config_.semantics.polls) return;
  // A later-stage worker awaits its next activations from any upstream neighbour: one receive
  // posted per world with a live one, each polled by its coroutine (WorldCommunicator.recv names
  // one world), so its loop never idles while it runs [inferred from the public code].
  for (std::size_t s = 1; s < workers_.size(); ++s) {
    const int upstream = live_workers(static_cast<int>(s) - 1);
    for (auto& k : workers_[s]) {
      const bool running = k.state == State::kLive || k.state == State::kDraining;
      k.w->posted_recvs = running ? upstream : 0;
      const bool polling = k.w->posted_recvs > 0;
      if (polling == k.polling) continue;
      k.polling = polling;
      if (polling)
        k.polling_since = engine_.now();
      else
        poll_s_ += (engine_.now() - k.polling_since).seconds();
    }
  }
}

StageWorker* ElasticDeployment::route(int stage, const StageWorker* current) {
  const int i = routers_.pick(stage, current != nullptr ? current->index : -1);
  return i < 0 ? nullptr : at(stage, i).w;
}

void ElasticDeployment::path_changed(Replica& r, std::uint32_t v, StageWorker& from,
                                     StageWorker& to) {
  MLSIM_CHECK(from.stage == to.stage && from.stage > 0, "a path changes within a later stage");
  routers_.engine_moved(from.stage, from.index, to.index, r.engine_outstanding_tokens(v));
}

bool ElasticDeployment::routers_consistent() const {
  for (std::size_t s = 1; s < workers_.size(); ++s)
    for (const auto& k : workers_[s]) {
      std::int64_t engines = 0, work = 0;
      for (const auto& [r, v] : engine_slots_)
        if (r->planned_path(v, s) == k.w) {
          engines += 1;
          work += r->engine_outstanding_tokens(v);
        }
      if (engines != routers_.engines(k.stage, k.index) || work != routers_.work(k.stage, k.index))
        return false;
    }
  return true;
}

void ElasticDeployment::work_changed(std::uint32_t slot, std::int64_t delta) {
  const auto& [r, v] = engine_slots_[slot];
  for (std::size_t s = 1; s < workers_.size(); ++s)
    routers_.work_changed(static_cast<int>(s), r->planned_path(v, s)->index, delta);
}

void ElasticDeployment::watch(NodeHealth& nodes) {
  nodes.on_change([this](NodeId node, bool up) {
    for (std::size_t s = 0; s < workers_.size(); ++s)
      for (std::size_t i = 0; i < workers_[s].size(); ++i) {
        const auto& hosts = workers_[s][i].w->hosts;
        if (std::find(hosts.begin(), hosts.end(), node) == hosts.end()) continue;
        if (up)
          repair_worker(static_cast<int>(s), static_cast<int>(i));
        else
          fail_worker(static_cast<int>(s), static_cast<int>(i));
      }
  });
}

void ElasticDeployment::start() {
  for (std::size_t s = 0; s < workers_.size(); ++s)
    for (std::size_t i = 0; i < workers_[s].size(); ++i) {
      Worker& k = workers_[s][i];
      const bool live = static_cast<int>(i) < config_.stages[s].replicas;
      set_state(k, live ? State::kLive : State::kSpare);
      k.w->alive = live;
      k.joined = engine_.now();
      if (live) allocate(k, true);
    }
  // Every engine's path starts balanced over the live workers of each stage.
  for (std::size_t s = 1; s < workers_.size(); ++s) rebalance(static_cast<int>(s));
  refresh_routable();
  for (const ScaleCommand& c : config_.scale)
    engine_.schedule_at(std::max(c.at, engine_.now()), [this, c] { scale(c.stage, c.delta); });
  next_autoscale_ = engine_.now() + config_.autoscaler.interval;
  engine_.schedule_in(Time::zero(), [this] { sample(); });
}

void ElasticDeployment::allocate(Worker& k, bool on) {
  if (on == k.allocated_now) return;
  k.allocated_now = on;
  if (on)
    k.allocated = engine_.now();
  else
    gpu_seconds_ += (engine_.now() - k.allocated).seconds() * gpus_per_worker_;
}

int ElasticDeployment::live_workers(int stage) const {
  int n = 0;
  for (const auto& k : workers_[static_cast<std::size_t>(stage)]) n += k.state == State::kLive;
  return n;
}

Time ElasticDeployment::load_time(int stage) const {
  const double bps = config_.costs.weight_load.bytes_per_s;
  if (bps <= 0) return Time::zero();
  return Time::from_seconds(weight_bytes_[static_cast<std::size_t>(stage)] / bps);
}

Time ElasticDeployment::detection_delay(int stage, int index, Time failure) const {
  // The first neighbour whose watchdog finds one of the failed worker's worlds broken tells the
  // routers. The upstream worker of a pair hosts the pair's store (rank 0, as the leader in
  // pymultiworld's examples/resnet/m8d.py), so a downstream neighbour notices at its next tick.
  const Worker& failed = workers_[static_cast<std::size_t>(stage)][static_cast<std::size_t>(index)];
  const auto& wd = config_.costs.watchdog;
  auto detect = [&](Time observer, bool store_on_peer) {
    // A world created after the observer's loop started (the failed worker joined later) is
    // first checked at the observer's first check after its creation, against 0.
    const Time check = wd.update_period * wd.updates_per_check;
    if (failed.joined > observer) {
      const std::int64_t cp = check.count_ns();
      observer = observer + check * (((failed.joined - observer).count_ns() + cp - 1) / cp);
    }
    return collectives::watchdog_detection_time(wd, observer, failed.joined, failure,
                                                store_on_peer);
  };
  Time first = Time::max();
  for (int ns : {stage - 1, stage + 1}) {
    if (ns < 0 || ns >= static_cast<int>(workers_.size())) continue;
    for (const auto& n : workers_[static_cast<std::size_t>(ns)])
      if (n.state == State::kLive) first = std::min(first, detect(n.joined, ns > stage));
  }
  if (first == Time::max())  // no live neighbour: the serving front's own check [assumed]
    first = detect(Time::zero(), false);
  MLSIM_CHECK(first >= failure, "a failure is detected after it happens");
  return first - failure;
}

void ElasticDeployment::fail_worker(int stage, int index) {
  Worker& k = at(stage, index);
  if (k.state != State::kLive && k.state != State::kLoading && k.state != State::kDraining) return;
  const bool was_live = k.state != State::kLoading;
  if (k.state == State::kDraining) {
    k.leaving = true;  // it was on its way out: it does not rejoin when repaired
    --draining_;
  }
  ++k.generation;
  ++failures_;
  allocate(k, false);
  StageWorker& w = *k.w;
  w.alive = false;
  w.epoch += 1;  // work running there and transfers addressed to it are lost
  w.busy = false;
  w.queue.clear();
  if (!was_live) {
    set_state(k, State::kDown);  // it had not joined: nothing else depended on it
    return;
  }
  set_state(k, State::kFailed);
  k.repaired_before_detection = false;
  if (stage == 0) {
    // The process is gone with its queues; the requests are lost until the failure is detected.
    Replica& r = *front_[static_cast<std::size_t>(index)];
    r.set_active(false);
  }
  const Time delay = detection_delay(stage, index, engine_.now());
  detection_s_.add(delay.seconds());
  engine_.schedule_in(delay,
                      [this, stage, index, g = k.generation] { on_detected(stage, index, g); });
}

void ElasticDeployment::on_detected(int stage, int index, std::uint64_t generation) {
  Worker& k = at(stage, index);
  if (k.generation != generation || k.state != State::kFailed) return;
  ++detections_;
  set_state(k, State::kDown);
  take_out(stage, index);
  if (k.leaving) {
    k.leaving = false;
    k.repaired_before_detection = false;
    set_state(k, State::kSpare);
    return;
  }
  if (k.repaired_before_detection) {
    k.repaired_before_detection = false;
    begin_join(stage, index);
  }
}

void ElasticDeployment::take_out(int stage, int index) {
  if (!config_.semantics.isolates_failures) {
    // Single world: the group is gone; rebuild it over the live workers, every one reloading its
    // weights (the processes were torn down).
    Time reload = Time::zero();
    for (std::size_t s = 0; s < workers_.size(); ++s)
      if (live_workers(static_cast<int>(s)) > 0)
        reload = std::max(reload, load_time(static_cast<int>(s)));
    restart(config_.costs.world_creation + reload, /*lose_kv=*/true);
    return;
  }
  if (stage == 0) {
    Replica& r = *front_[static_cast<std::size_t>(index)];
    std::vector<Request*> out;
    r.evacuate(out);
    rerouted_ += out.size();
    recomputed_ += out.size();
    refresh_routable();
    for (Request* q : out) host_.reroute(*q);
    return;
  }
  const StageWorker* gone = at(stage, index).w;
  for (Replica* r : front_)
    for (std::uint32_t v = 0; v < r->virtual_engines(); ++v) {
      const auto st = static_cast<std::size_t>(stage);
      if (r->path(v, st) != gone) {
        // Moving its KV to it: the move is off, the KV stays where it was.
        if (r->planned_path(v, st) == gone) r->cancel_migration(v);
        continue;
      }
      if (StageWorker* to = route(stage)) r->bind(v, *to);
      recomputed_ += r->reset_engine(v);
    }
  refresh_routable();
}

void ElasticDeployment::restart(Time outage, bool lose_kv) {
  ++restarts_;
  restarting_ = true;
  std::vector<Request*> out;
  for (Replica* r : front_) {
    r->set_active(false);
    if (lose_kv) r->evacuate(out);
  }
  if (lose_kv) {
    recomputed_ += out.size();
    for (auto& stage : workers_)
      for (auto& k : stage) {
        k.w->epoch += 1;
        k.w->busy = false;
        k.w->queue.clear();
      }
    for (Request* q : out) held_.push_back(q);
  }
  restart_until_ = std::max(restart_until_, engine_.now() + outage);
  refresh_routable();
  engine_.schedule_at(restart_until_, [this] { end_restart(); });
}

void ElasticDeployment::end_restart() {
  if (!restarting_ || engine_.now() < restart_until_) return;
  restarting_ = false;
  for (std::size_t s = 0; s < workers_.size(); ++s)
    for (auto& k : workers_[s]) {
      if (k.state == State::kLoading && k.awaiting_restart) {
        k.awaiting_restart = false;
        set_state(k, State::kLive);
        ++joins_;
      }
      if (k.state == State::kLive) {
        k.joined = engine_.now();  // the re-created group's monitor starts now
        k.w->alive = true;
      }
    }
  for (std::size_t s = 1; s < workers_.size(); ++s) rebalance(static_cast<int>(s));
  refresh_routable();
}

void ElasticDeployment::repair_worker(int stage, int index) {
  Worker& k = at(stage, index);
  if (k.state == State::kFailed) {
    // The restarted process rejoins once its old worlds are known broken.
    k.repaired_before_detection = true;
    return;
  }
  if (k.state != State::kDown) return;
  begin_join(stage, index);
}

void ElasticDeployment::begin_join(int stage, int index) {
  Worker& k = at(stage, index);
  set_state(k, State::kLoading);
  k.awaiting_restart = false;
  ++k.generation;
  allocate(k, true);
  Time delay = load_time(stage);
  if (config_.semantics.joins_online) {
    // One world per live neighbour, created one after another (WorldManager.initialize_world is
    // awaited per world) [assumed sequential].
    int neighbours = 0;
    for (int ns : {stage - 1, stage + 1})
      if (ns >= 0 && ns < static_cast<int>(workers_.size())) neighbours += live_workers(ns);
    delay += config_.costs.world_creation * std::max(1, neighbours);
  }
  engine_.schedule_in(delay,
                      [this, stage, index, g = k.generation] { finish_join(stage, index, g); });
}

void ElasticDeployment::finish_join(int stage, int index, std::uint64_t generation) {
  Worker& k = at(stage, index);
  if (k.generation != generation || k.state != State::kLoading) return;
  StageWorker& w = *k.w;
  w.epoch += 1;
  w.busy = false;
  w.queue.clear();
  if (!config_.semantics.joins_online) {
    // Single world: the weights are loaded; the group is re-created with the new worker, the
    // others pausing meanwhile (the micro-batches in the pipeline finish [assumed drained]).
    k.awaiting_restart = true;
    restart(config_.costs.world_creation, /*lose_kv=*/false);
    return;
  }
  ++joins_;
  set_state(k, State::kLive);
  k.joined = engine_.now();
  w.alive = true;
  if (stage > 0) rebalance(stage);
  refresh_routable();
}

int ElasticDeployment::scale(int stage, int delta) {
  int changed = 0;
  auto& list = workers_[static_cast<std::size_t>(stage)];
  for (; delta > 0; --delta) {
    auto it = std::find_if(list.begin(), list.end(),
                           [](const Worker& k) { return k.state == State::kSpare; });
    if (it == list.end()) return changed;  // no spare host left
    ++scale_outs_;
    ++changed;
    begin_join(stage, static_cast<int>(it - list.begin()));
  }
  for (; delta < 0; ++delta) {
    int index = -1;
    for (int i = static_cast<int>(list.size()) - 1; i >= 0 && index < 0; --i)
      if (list[static_cast<std::size_t>(i)].state == State::kLive) index = i;
    if (index < 0) return changed;
    ++scale_ins_;
    ++changed;
    if (config_.drain_scale_in)
      begin_drain(stage, index);
    else
      remove_worker(stage, index);
  }
  return changed;
}

void ElasticDeployment::remove_worker(int stage, int index) {
  auto& list = workers_[static_cast<std::size_t>(stage)];
  Worker& k = list[static_cast<std::size_t>(index)];
  ++k.generation;
  allocate(k, false);
  set_state(k, State::kSpare);
  k.w->alive = false;
  k.w->epoch += 1;
  k.w->busy = false;
  k.w->queue.clear();
  if (stage == 0) front_[static_cast<std::size_t>(index)]->set_active(false);
  if (config_.semantics.isolates_failures) {
    take_out(stage, index);
  } else {
    // The group is re-created without it; the requests it held recompute elsewhere.
    if (stage == 0) {
      std::vector<Request*> out;
      front_[static_cast<std::size_t>(index)]->evacuate(out);
      rerouted_ += out.size();
      recomputed_ += out.size();
      for (Request* q : out) held_.push_back(q);
    } else {
      for (Replica* r : front_)
        for (std::uint32_t v = 0; v < r->virtual_engines(); ++v)
          if (r->path(v, static_cast<std::size_t>(stage)) == k.w ||
              r->planned_path(v, static_cast<std::size_t>(stage)) == k.w)
            recomputed_ += r->reset_engine(v);
    }
    restart(config_.costs.world_creation, /*lose_kv=*/false);
  }
}

void ElasticDeployment::begin_drain(int stage, int index) {
  Worker& k = at(stage, index);
  ++k.generation;
  set_state(k, State::kDraining);
  k.drain_started = engine_.now();
  ++drains_;
  ++draining_;
  // A front worker leaves the routers (its replica keeps running what it holds); a later stage's
  // engines move off it (rebalance: by KV migration, or when they hold no KV).
  refresh_routable();
  if (stage > 0) rebalance(stage, /*join=*/false);
  engine_.schedule_in(config_.drain_timeout, [this, stage, index, g = k.generation] {
    finish_drain(stage, index, g, /*timed_out=*/true);
  });
  check_drained();
}

void ElasticDeployment::check_drained() {
  if (draining_ == 0) return;
  for (std::size_t s = 0; s < workers_.size(); ++s)
    for (std::size_t i = 0; i < workers_[s].size(); ++i) {
      Worker& k = workers_[s][i];
      if (k.state != State::kDraining) continue;
      bool empty = !k.w->busy && k.w->queue.empty();
      if (s == 0) {
        const Replica& r = *front_[i];
        for (std::uint32_t v = 0; v < r.virtual_engines() && empty; ++v) empty = r.engine_idle(v);
      } else {
        for (Replica* r : front_)
          for (std::uint32_t v = 0; v < r->virtual_engines(); ++v) {
            if (r->path(v, s) != k.w && r->planned_path(v, s) != k.w) continue;
            // An engine with no KV and nothing in flight moves for free.
            if (!r->engine_migrating(v) && !r->engine_holds_kv(v)) {
              if (StageWorker* to = route(static_cast<int>(s))) {
                r->bind(v, *to);
                continue;
              }
            }
            empty = false;
          }
      }
      if (empty) finish_drain(static_cast<int>(s), static_cast<int>(i), k.generation, false);
    }
}

void ElasticDeployment::finish_drain(int stage, int index, std::uint64_t generation,
                                     bool timed_out) {
  Worker& k = at(stage, index);
  if (k.generation != generation || k.state != State::kDraining) return;
  --draining_;
  drain_timeouts_ += timed_out ? 1 : 0;
  drain_s_.add((engine_.now() - k.drain_started).seconds());
  // What is still there (only after a timeout) is taken out as an immediate scale-in would.
  remove_worker(stage, index);
}

ElasticDeployment::State ElasticDeployment::state_of(int stage, const StageWorker* w) const {
  for (const auto& k : workers_[static_cast<std::size_t>(stage)])
    if (k.w == w) return k.state;
  return State::kDown;
}

void ElasticDeployment::move_engine(Replica& r, std::uint32_t v, StageWorker& to) {
  if (!config_.kv_migration) {
    r.bind(v, to);
    recomputed_ += r.reset_engine(v);
    return;
  }
  if (!r.engine_holds_kv(v)) {  // nothing to take along
    r.bind(v, to);
    return;
  }
  requests_migrated_ += r.engine_requests(v);
  r.migrate_engine(v, to, [this](std::int64_t bytes) {
    ++kv_migrations_;
    kv_migrated_bytes_ += static_cast<double>(bytes);
    check_drained();
  });
}

void ElasticDeployment::rebalance(int stage, bool join) {
  const bool by_work = config_.rebalancing == Rebalancing::kLeastWork;
  even_out_engines(stage, by_work);
  if (by_work && join) even_out_work(stage);
}

void ElasticDeployment::even_out_engines(int stage, bool by_work) {
  // Binds the engines on workers that are not live, then evens out the engines per live worker,
  // moving the engines with the fewest requests (each move loses the moved requests' KV, unless
  // it migrates). Engines on a draining worker move by KV migration; without it they stay until
  // they hold no KV (check_drained()). An engine migrating counts at its destination.
  //
  // Under least_work (`by_work`), an engine that must move (its worker is not live, or it drains
  // with KV migration) goes to the live worker with the least work, and only engines holding no
  // KV (they move for free) even out by counts; even_out_work() then moves the ones holding KV.
  const auto s = static_cast<std::size_t>(stage);
  std::vector<const StageWorker*> live;
  for (const auto& k : workers_[s])
    if (k.state == State::kLive) live.push_back(k.w);
  if (live.empty()) return;
  std::size_t engines = 0;
  for (const Replica* r : front_) engines += r->virtual_engines();
  const std::size_t target = (engines + live.size() - 1) / live.size();
  auto count = [&](const StageWorker* w) {
    return static_cast<std::size_t>(routers_.engines(stage, w->index));
  };
  auto is_live = [&](const StageWorker* w) {
    return std::find(live.begin(), live.end(), w) != live.end();
  };
  for (;;) {
    // The engine to move: on a dead or draining worker first, else on a worker above the
    // target, the one with the fewest requests.
    Replica* from_r = nullptr;
    std::uint32_t from_v = 0;
    bool must = false, dead = false;
    std::size_t fewest = 0;
    for (Replica* r : front_)
      for (std::uint32_t v = 0; v < r->virtual_engines(); ++v) {
        if (r->engine_migrating(v)) continue;
        const StageWorker* w = r->path(v, s);
        const bool draining = state_of(stage, w) == State::kDraining;
        if (draining && !config_.kv_migration) continue;
        const bool on_dead = !is_live(w) && !draining;
        const bool must_move = on_dead || draining;
        if (!must_move && (count(w) <= target || (by_work && r->engine_holds_kv(v)))) continue;
        const std::size_t n = r->engine_requests(v);
        if (from_r == nullptr || (must_move && !must) || (must_move == must && n < fewest)) {
          from_r = r;
          from_v = v;
          must = must_move;
          dead = on_dead;
          fewest = n;
        }
      }
    if (from_r == nullptr) return;
    StageWorker* to =
        at(stage, must && by_work ? routers_.least_work(stage) : routers_.fewest_engines(stage)).w;
    if (!must && count(to) + 1 >= count(from_r->path(from_v, s))) return;  // balanced enough
    if (dead) {
      from_r->bind(from_v, *to);
      recomputed_ += from_r->reset_engine(from_v);
    } else {
      move_engine(*from_r, from_v, *to);
    }
  }
}

void ElasticDeployment::even_out_work(int stage) {
  // An engine holding KV moves from the worker with the most work to the one with the least
  // only while that narrows their gap: with w its tokens still to process and x the tokens a
  // recompute redoes at the destination (0 with KV migration), it moves iff least + w + x < most;
  // the engine leaving the smallest larger side, max(most - w, least + w + x), moves first (then
  // the one with the fewest requests, then the first). Each engine moves at most once per call,
  // and it stops when the most loaded worker has no such engine. A join thus moves KV only where
  // the work is uneven, not to even out the counts (docs/elastic_serving.md); a drain beginning
  // (not a join) moves no engine holding KV between live workers.
  const auto s = static_cast<std::size_t>(stage);
  std::vector<std::pair<const Replica*, std::uint32_t>> moved;
  for (;;) {
    const int most = routers_.most_work(stage), least = routers_.least_work(stage);
    if (most < 0 || most == least) return;
    const std::int64_t w_most = routers_.work(stage, most), w_least = routers_.work(stage, least);
    const StageWorker* from = at(stage, most).w;
    Replica* best_r = nullptr;
    std::uint32_t best_v = 0;
    std::int64_t best_side = 0;
    std::size_t best_n = 0;
    for (Replica* r : front_)
      for (std::uint32_t v = 0; v < r->virtual_engines(); ++v) {
        if (r->engine_migrating(v) || r->path(v, s) != from || !r->engine_holds_kv(v)) continue;
        const std::pair<const Replica*, std::uint32_t> engine(r, v);
        if (std::find(moved.begin(), moved.end(), engine) != moved.end()) continue;
        const std::int64_t w = r->engine_outstanding_tokens(v);
        const std::int64_t x = config_.kv_migration ? 0 : r->engine_recompute_tokens(v);
        if (w_least + w + x >= w_most) continue;  // it would not narrow the gap
        const std::int64_t side = std::max(w_most - w, w_least + w + x);
        const std::size_t n = r->engine_requests(v);
        if (best_r == nullptr || side < best_side || (side == best_side && n < best_n)) {
          best_r = r;
          best_v = v;
          best_side = side;
          best_n = n;
        }
      }
    if (best_r == nullptr) return;
    moved.emplace_back(best_r, best_v);
    move_engine(*best_r, best_v, *at(stage, least).w);
  }
}

void ElasticDeployment::bind_idle_engine(Replica& replica, std::uint32_t engine) {
  // An engine holding no KV moves for free to the worker the boundary router picks at each
  // stage, its own binding not counted (it stays unless another worker is better).
  for (std::size_t s = 1; s < workers_.size(); ++s) {
    StageWorker* now = replica.path(engine, s);
    StageWorker* to = route(static_cast<int>(s), now);
    if (to == nullptr || to == now) continue;
    replica.bind(engine, *to);
  }
  check_drained();
}

void ElasticDeployment::engine_settled(Replica&, std::uint32_t) {
  check_drained();
}

bool ElasticDeployment::can_serve() const {
  if (restarting_) return false;
  for (std::size_t s = 0; s < workers_.size(); ++s)
    if (live_workers(static_cast<int>(s)) == 0) return false;
  return true;
}

void ElasticDeployment::set_serving(bool serving) {
  if (serving == serving_) return;
  if (serving_) serving_s_ += (engine_.now() - serving_since_).seconds();
  serving_ = serving;
  serving_since_ = engine_.now();
}

void ElasticDeployment::refresh_routable() {
  const bool ok = can_serve();
  std::vector<Replica*> routable;
  for (std::size_t i = 0; i < front_.size(); ++i) {
    const State st = workers_.front()[i].state;
    // A failed front worker stays routable until its failure is detected (nobody knows yet).
    if (ok && (st == State::kLive || st == State::kFailed)) routable.push_back(front_[i]);
    // A draining front worker runs what it holds but takes no new request.
    const bool active = ok && (st == State::kLive || st == State::kDraining);
    if (front_[i]->active() != active) front_[i]->set_active(active);
  }
  if (routable != routable_ || routable_version_ == 0) {
    routable_ = std::move(routable);
    ++routable_version_;  // the router re-indexes the set at the next arrival
  }
  set_serving(ok);
  if (routable_.empty()) return;
  while (!held_.empty()) {
    Request* r = held_.front();
    held_.pop_front();
    host_.reroute(*r);
  }
}

double ElasticDeployment::available_seconds(Time now) const {
  return serving_s_ + (serving_ ? (now - serving_since_).seconds() : 0);
}

void ElasticDeployment::sample() {
  int live = 0;
  for (std::size_t s = 0; s < workers_.size(); ++s) live += live_workers(static_cast<int>(s));
  // Latency over time: the means over the requests completed since the previous sample (empty
  // when none completed).
  const auto sums = host_.latency_sums();
  const std::uint64_t completed = host_.completed();
  const double n = static_cast<double>(completed - last_completed_);
  const double none = std::numeric_limits<double>::quiet_NaN();
  series_.add(
      engine_.now(),
      {static_cast<double>(completed), static_cast<double>(host_.tokens_generated()),
       static_cast<double>(host_.in_system()), serving_ ? 1.0 : 0.0, static_cast<double>(live),
       static_cast<double>(recomputed_), n > 0 ? (sums.ttft_s - last_sums_.ttft_s) / n : none,
       n > 0 ? (sums.e2e_s - last_sums_.e2e_s) / n : none,
       n > 0 ? static_cast<double>(sums.slo_met - last_sums_.slo_met) / n : none});
  last_sums_ = sums;
  last_completed_ = completed;
  check_drained();
  if (config_.autoscaler.enabled && engine_.now() >= next_autoscale_) {
    next_autoscale_ = engine_.now() + config_.autoscaler.interval;
    autoscale();
  }
  // Sampling stops when nothing else can happen: every request is done, or no other event is
  // pending (requests that can never be served are reported unfinished, report()).
  if (host_.arrivals_done() && host_.in_system() == 0) return;
  if (engine_.pending_events() == 0) return;
  engine_.schedule_in(series_interval_, [this] { sample(); });
}

void ElasticDeployment::autoscale() {
  const AutoscalerConfig& a = config_.autoscaler;
  // The SLO attainment since the previous check (the signal of `slo_signal`).
  const auto sums = host_.latency_sums();
  const std::uint64_t completed = host_.completed();
  const std::uint64_t done = completed - autoscale_completed_;
  const double attainment = done > 0 ? static_cast<double>(sums.slo_met - autoscale_sums_.slo_met) /
                                           static_cast<double>(done)
                                     : 0;
  autoscale_sums_ = sums;
  autoscale_completed_ = completed;
  if (routable_.empty()) return;
  if (autoscaled_once_ && engine_.now() - last_autoscale_ < a.cooldown) return;
  int delta = 0;
  if (a.slo_signal) {
    if (done == 0) return;
    if (attainment < a.scale_out_below)
      delta = 1;
    else if (attainment > a.scale_in_above && live_workers(a.stage) > a.min_replicas)
      delta = -1;
  } else {
    std::size_t waiting = 0;
    for (const Replica* r : routable_) waiting += r->waiting_count();
    const double per_front = static_cast<double>(waiting) / static_cast<double>(routable_.size());
    if (per_front > a.scale_out_above)
      delta = 1;
    else if (per_front < a.scale_in_below && live_workers(a.stage) > a.min_replicas)
      delta = -1;
  }
  if (delta == 0) return;
  // Only a scale-out or -in that happened starts the cool-down: one blocked for lack of a spare
  // changed nothing, and the next check may act (a scale-in once the load falls).
  if (scale(a.stage, delta) == 0) return;
  autoscaled_once_ = true;
  last_autoscale_ = engine_.now();
}

void ElasticDeployment::report(Results& out, Time makespan) const {
  double gpu_s = gpu_seconds_;
  for (const auto& stage : workers_)
    for (const auto& k : stage)
      if (k.allocated_now && makespan > k.allocated)
        gpu_s += (makespan - k.allocated).seconds() * gpus_per_worker_;
  const double span = makespan.seconds();
  const double serving =
      serving_s_ +
      (serving_ && makespan > serving_since_ ? (makespan - serving_since_).seconds() : 0);
  std::uint64_t lost = 0;
  for (const Replica* r : front_) lost += r->lost_micro_batches();
  out.set_metric("serving_elastic_availability", span > 0 ? std::min(1.0, serving / span) : 0);
  out.set_metric("serving_elastic_unavailable_s", std::max(0.0, span - serving));
  out.set_metric("serving_elastic_gpu_hours", gpu_s / 3600.0);
  out.set_metric("serving_elastic_requests_recomputed", static_cast<double>(recomputed_));
  out.set_metric("serving_elastic_requests_rerouted", static_cast<double>(rerouted_));
  out.set_metric("serving_elastic_micro_batches_lost", static_cast<double>(lost));
  // MultiWorld's busy-polling: a core per worker while its event loop has an operation pending
  // (front: an engine in flight; later stages: a receive posted to a live upstream neighbour).
  double poll_s = poll_s_;
  for (const auto& stage : workers_)
    for (const auto& k : stage)
      if (k.polling && makespan > k.polling_since) poll_s += (makespan - k.polling_since).seconds();
  if (config_.semantics.polls)
    for (const Replica* r : front_) poll_s += r->polling_seconds(makespan);
  out.set_metric("serving_elastic_poll_cpu_hours", poll_s / 3600.0);
  out.set_metric("serving_elastic_failures", static_cast<double>(failures_));
  out.set_metric("serving_elastic_failures_detected", static_cast<double>(detections_));
  out.set_metric("serving_elastic_detection_mean_s", detection_s_.mean());
  out.set_metric("serving_elastic_restarts", static_cast<double>(restarts_));
  out.set_metric("serving_elastic_joins", static_cast<double>(joins_));
  out.set_metric("serving_elastic_scale_outs", static_cast<double>(scale_outs_));
  out.set_metric("serving_elastic_scale_ins", static_cast<double>(scale_ins_));
  if (config_.drain_scale_in) {
    out.set_metric("serving_elastic_drains", static_cast<double>(drains_));
    out.set_metric("serving_elastic_drain_timeouts", static_cast<double>(drain_timeouts_));
    out.set_metric("serving_elastic_drain_mean_s", drain_s_.mean());
  }
  if (config_.kv_migration) {
    out.set_metric("serving_elastic_kv_migrations", static_cast<double>(kv_migrations_));
    out.set_metric("serving_elastic_requests_migrated", static_cast<double>(requests_migrated_));
    out.set_metric("serving_elastic_kv_migrated_bytes", kv_migrated_bytes_);
  }
  // Requests still in the system when nothing more could happen (a stage left without a worker
  // for good): reported, never silently lost.
  out.set_metric("serving_elastic_requests_unfinished", static_cast<double>(host_.in_system()));
  out.add_series(series_);
  auto& d = out.details()["serving_elastic"];
  d["process_groups"] = config_.process_groups;
  d["stage_router"] = config_.stage_router;
  d["virtual_engines_per_front_replica"] = front_.front()->virtual_engines();
  auto& stages = d["stages"];
  stages = nlohmann::json::array();
  for (std::size_t s = 0; s < workers_.size(); ++s) {
    nlohmann::json st;
    st["layers"] = config_.stages[s].layers;
    st["live_at_end"] = live_workers(static_cast<int>(s));
    auto& util = st["worker_utilisation"];
    util = nlohmann::json::array();
    for (const auto& k : workers_[s]) util.push_back(span > 0 ? k.w->busy_s / span : 0.0);
    stages.push_back(std::move(st));
  }
}

}  // namespace mlsim::serving
