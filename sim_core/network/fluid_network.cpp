#include "sim_core/network/fluid_network.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "sim_core/base/error.hpp"
#include "sim_core/base/heap_sift.hpp"
#include "sim_core/network/least_key.hpp"

namespace mlsim {
namespace {
constexpr std::uint32_t kNoSlot = ~0u;
// Rates closer than this (relative) are the same rate: re-solving a component must not reschedule
// flows whose share did not really change.
constexpr double kRateTolerance = 1e-12;
}  // namespace

FluidNetwork::FluidNetwork(Engine& engine, const Topology& topology, Sharing sharing,
                           bool route_classes)
    : engine_(engine),
      topology_(topology),
      router_(topology),
      sharing_(sharing),
      route_classes_(route_classes && sharing == Sharing::kMaxMin),
      links_(topology.links().size()),
      group_of_link_(topology.links().size(), kNoSlot),
      link_decided_(topology.links().size(), 0),
      link_target_(topology.links().size(), kNoSlot),
      local_index_(topology.links().size()) {
  for (LinkId l = 0; l < links_.size(); ++l)
    links_[l].capacity = topology.links()[l].bandwidth.bytes_per_s;
  link_saved_.assign(links_.size(), kNoSlot);
}

FluidNetwork::~FluidNetwork() {
  if (wake_event_.valid()) engine_.cancel(wake_event_);
}

std::string_view FluidNetwork::backend_name() const {
  return sharing_ == Sharing::kNone ? "analytic" : "flow";
}

// ---- Transfer slots --------------------------------------------------------------------------

std::uint32_t FluidNetwork::allocate() {
  if (!free_.empty()) {
    const std::uint32_t f = free_.back();
    free_.pop_back();
    return f;
  }
  MLSIM_CHECK(slots_used_ < kNoSlot, "too many transfers in flight");
  if ((slots_used_ >> kChunkBits) >= chunks_.size())
    chunks_.push_back(std::make_unique<Flow[]>(std::size_t{1} << kChunkBits));
  return slots_used_++;
}

void FluidNetwork::release_slot(std::uint32_t f) {
  Flow& fl = slot(f);
  fl.lazy = false;
  cancel_timer(f);
  fl.links.clear();
  fl.pos.clear();
  fl.done.reset();
  free_.push_back(f);
}

std::uint32_t FluidNetwork::find(TransferId id) const {
  const auto f = static_cast<std::uint32_t>(id & 0xffffffffu);
  if (f >= slots_used_) return kNoSlot;
  const Flow& fl = slot(f);
  if (fl.generation != (id >> 32) || fl.state == State::kFree || fl.state == State::kFailing)
    return kNoSlot;
  return f;
}

// ---- Events and reports ----------------------------------------------------------------------

void FluidNetwork::schedule(std::uint32_t f, Time t) {
  Flow& fl = slot(f);
  MLSIM_CHECK(!has_timer(f), "flow scheduled twice");
  if (fifo_accepts(t)) {
    // Times arrive in order (the common case: equal latencies and sizes), so a FIFO shared by
    // all such flows replaces a heap entry each.
    queue_.push(Timer{t.count_ns(), f, fl.ticket});
    fl.queued = true;
    arm_queue();
    return;
  }
  timers_.push(f, Wake{t.count_ns(), ++wake_seq_});
  arm_wakeup();
}

void FluidNetwork::reschedule(std::uint32_t f, Time t) {
  if (timers_.contains(f) && !fifo_accepts(t)) {
    // Same as cancel + schedule (a new place in the order), without leaving the heap.
    timers_.update(f, Wake{t.count_ns(), ++wake_seq_});
    arm_wakeup();
    return;
  }
  cancel_timer(f);
  schedule(f, t);
}

void FluidNetwork::cancel_timer(std::uint32_t f) {
  Flow& fl = slot(f);
  timers_.erase(f);
  if (fl.queued) {
    ++fl.ticket;  // its queue entry is now stale and will be skipped
    fl.queued = false;
  }
}

void FluidNetwork::arm_queue() {
  // The FIFO takes its place in the order when its head is armed, as one engine event for the
  // head would.
  if (queue_armed_ || queue_.empty()) return;
  queue_armed_ = true;
  queue_wake_ = Wake{queue_.front().time, ++wake_seq_};
  arm_wakeup();
}

void FluidNetwork::arm_wakeup() {
  if (waking_) return;
  std::int64_t next = std::numeric_limits<std::int64_t>::max();
  if (queue_armed_) next = queue_wake_.time;
  if (solve_armed_) next = std::min(next, solve_wake_.time);
  if (!timers_.empty()) next = std::min(next, timers_.top_key().time);
  if (!class_timers_.empty()) next = std::min(next, class_timers_.top_key().time);
  if (next == std::numeric_limits<std::int64_t>::max()) return;
  // An engine event at or before `next` is kept: if early, it finds nothing due and re-arms.
  // Only an earlier head replaces it, so the engine holds at most one live event of ours.
  if (wake_event_.valid()) {
    if (wake_time_.count_ns() <= next) return;
    engine_.cancel(wake_event_);
  }
  wake_time_ = Time::ns(next);
  wake_event_ = engine_.schedule_at(wake_time_, [this] { wake_up(); });
}

void FluidNetwork::wake_up() {
  wake_event_ = {};
  waking_ = true;
  const std::int64_t now = engine_.now().count_ns();
  // A callback's engine_.stop() takes effect before the next backend event, as it would
  // between engine events; what is left due runs when the engine runs again.
  while (!engine_.stopped()) {
    // The earliest due of: the pending solve, the FIFO's head, the heap's head.
    enum class Next { kNothing, kSolve, kQueue, kTimer, kClass } next = Next::kNothing;
    Wake best{now + 1, 0};
    if (solve_armed_ && solve_wake_ < best) {
      next = Next::kSolve;
      best = solve_wake_;
    }
    if (queue_armed_ && queue_wake_ < best) {
      next = Next::kQueue;
      best = queue_wake_;
    }
    if (!timers_.empty() && timers_.top_key() < best) {
      next = Next::kTimer;
      best = timers_.top_key();
    }
    if (!class_timers_.empty() && class_timers_.top_key() < best) next = Next::kClass;
    if (next == Next::kNothing) break;
    if (next == Next::kSolve) {
      solve_armed_ = false;
      solving_seeds_.swap(pending_seeds_);
      pending_seeds_.clear();
      double floor = pending_floor_;
      if (pending_arrival_ && route_classes_)
        floor = std::min(floor, arrival_floor(solving_seeds_));
      pending_floor_ = std::numeric_limits<double>::infinity();
      pending_arrival_ = false;
      solve_component(solving_seeds_, floor);
    } else if (next == Next::kQueue) {
      run_queue();
    } else if (next == Next::kClass) {
      const std::uint32_t g = class_timers_.top_id();
      class_timers_.pop();
      on_group_event(g);
    } else {
      const std::uint32_t f = timers_.top_id();
      timers_.pop();
      on_event(f);
    }
  }
  waking_ = false;
  arm_wakeup();
}

void FluidNetwork::run_queue() {
  queue_armed_ = false;
  const std::int64_t now = engine_.now().count_ns();
  while (!queue_.empty() && queue_.front().time <= now && !engine_.stopped()) {
    const Timer t = queue_.front();
    queue_.pop();
    Flow& fl = slot(t.flow);
    if (!fl.queued || fl.ticket != t.ticket) continue;  // cancelled or rescheduled
    fl.queued = false;
    on_event(t.flow);
  }
  arm_queue();
}

void FluidNetwork::on_event(std::uint32_t f) {
  Flow& fl = slot(f);
  switch (fl.state) {
    case State::kSending:
      if (fl.lazy) {
        deliver(f);
        return;
      }
      // A flow that shared a link has sent its last byte: the others get its bandwidth.
      settle(f);
      detach(f);
      fl.state = State::kArriving;
      rebalance(fl.links, fl.rate);
      if (fl.latency == Time::zero()) {
        deliver(f);
      } else {
        schedule(f, engine_.now() + fl.latency);
      }
      return;
    case State::kArriving:
      deliver(f);
      return;
    case State::kFailing:
      totals_.count_end(fl.bytes, true);
      report(f, true);
      return;
    case State::kFree:
      break;
  }
  MLSIM_CHECK(false, "event for a free transfer slot");
}

void FluidNetwork::deliver(std::uint32_t f) {
  Flow& fl = slot(f);
  if (fl.state == State::kSending) {  // a lazy flow still listed on its links
    settle(f);
    detach(f);
  }
  totals_.count_end(fl.bytes, false);
  report(f, false);
}

void FluidNetwork::report(std::uint32_t f, bool failed) {
  Flow& fl = slot(f);
  const TransferResult result{id_of(f),   fl.src,        fl.dst, fl.bytes,
                              fl.started, engine_.now(), failed};
  // The callback runs in place (slots never move) and may start new transfers; the id is
  // invalid from now on, but the slot is recycled only once the callback has returned.
  ++fl.generation;
  fl.state = State::kFree;
  if (fl.done) fl.done(result);
  release_slot(f);
}

void FluidNetwork::fail_later(std::uint32_t f) {
  Flow& fl = slot(f);
  cancel_timer(f);
  fl.state = State::kFailing;
  schedule(f, engine_.now());
}

// ---- Starting and cancelling -----------------------------------------------------------------

TransferId FluidNetwork::start_transfer(NodeId src, NodeId dst, Bytes bytes, DeliveryCallback done,
                                        std::uint64_t flow_label) {
  MLSIM_CHECK(src < topology_.nodes().size() && dst < topology_.nodes().size(),
              "transfer endpoint out of range");
  MLSIM_CHECK(bytes.count >= 0, "negative transfer size");
  const std::uint32_t f = allocate();
  Flow& fl = slot(f);
  fl.src = src;
  fl.dst = dst;
  fl.label = flow_label;
  fl.bytes = bytes;
  fl.started = engine_.now();
  fl.latency = Time::zero();
  fl.done = std::move(done);
  totals_.count_start(bytes);
  const TransferId id = id_of(f);

  if (src == dst) {
    fl.state = State::kArriving;
    schedule(f, engine_.now());
    return id;
  }
  const auto route = router_.route(src, dst, flow_label);
  if (!route) {
    fail_later(f);
    return id;
  }
  fl.latency = route->latency;
  if (bytes.count == 0) {
    fl.links.assign(route->links.begin(), route->links.end());
    fl.state = State::kArriving;
    schedule(f, engine_.now() + fl.latency);
    return id;
  }
  fl.state = State::kSending;
  fl.remaining = static_cast<double>(bytes.count);
  fl.rate = 0;
  fl.settled = engine_.now();
  fl.send_end = Time::max();
  if (route_classes_ && !route_free(route->links) && crowded(route->links)) {
    // It shares a crowded link: it joins its route's class, whose rate the solve at this instant
    // sets.
    fl.links.assign(route->links.begin(), route->links.end());
    join_class(f, fl.remaining);
    rebalance(fl.links, kArrival);
    return id;
  }
  const bool alone = attach(f, route->links);
  if (sharing_ == Sharing::kNone || alone) {
    // Nobody to share with: the bottleneck rate, fixed until something changes on the route.
    set_rate(f, bottleneck(fl), true);
    for (LinkId l : fl.links) start_period(l, fl.send_end);
  } else {
    rebalance(fl.links, route_classes_ ? kArrival : 0);
  }
  return id;
}

void FluidNetwork::start_transfers(std::span<TransferRequest> phase) {
  // Every start of the phase adds its links to the solve pending at this instant: the phase
  // costs one solve of the component(s) it touches.
  for (TransferRequest& r : phase)
    r.id = start_transfer(r.src, r.dst, r.bytes, std::move(r.done), r.flow_label);
}

bool FluidNetwork::cancel_transfer(TransferId id) {
  const std::uint32_t f = find(id);
  if (f == kNoSlot) return false;
  Flow& fl = slot(f);
  if (fl.state == State::kSending && fl.route_class != kNoSlot) {
    const double rate = class_rate(route_class(fl.route_class));
    leave_class(f);
    rebalance(fl.links, rate);
  } else if (fl.state == State::kSending) {
    const bool sending = still_sending(fl);
    settle(f);
    detach(f);
    if (sending) rebalance(fl.links, fl.rate);
  }
  fail_later(f);
  return true;
}

// ---- Links ------------------------------------------------------------------------------------

bool FluidNetwork::attach(std::uint32_t f, std::span<const LinkId> route) {
  Flow& fl = slot(f);
  fl.links.assign(route.begin(), route.end());
  fl.pos.resize(route.size());
  bool alone = true;
  for (std::uint32_t i = 0; i < route.size(); ++i) {
    const LinkId l = route[i];
    if (sharing_ == Sharing::kMaxMin) evict_finished(l);
    if (link_in_saved(l)) drop_saved_fill();  // the saved filling has no transfer of its own
    LinkState& ls = links_[l];
    if (!ls.flows.empty() || !ls.classes.empty()) alone = false;
    fl.pos[i] = static_cast<std::uint32_t>(ls.flows.size());
    ls.flows.push_back(Entry{f, i});
  }
  return alone;
}

void FluidNetwork::detach(std::uint32_t f) {
  Flow& fl = slot(f);
  for (std::uint32_t i = 0; i < fl.links.size(); ++i) {
    auto& list = links_[fl.links[i]].flows;
    const Entry last = list.back();
    list[fl.pos[i]] = last;
    slot(last.flow).pos[last.hop] = fl.pos[i];
    list.pop_back();
  }
}

bool FluidNetwork::route_free(std::span<const LinkId> route) {
  bool free = true;
  for (LinkId l : route) {
    evict_finished(l);
    free = free && links_[l].flows.empty() && links_[l].classes.empty();
  }
  return free;
}

void FluidNetwork::evict_finished(LinkId l) {
  // In flow mode a lazy flow is alone on its links, so there is at most one to look at.
  LinkState& ls = links_[l];
  if (ls.flows.size() != 1 || !ls.classes.empty()) return;
  const std::uint32_t g = ls.flows[0].flow;
  Flow& gl = slot(g);
  if (!gl.lazy || gl.send_end > engine_.now()) return;
  settle(g);
  detach(g);
  gl.state = State::kArriving;  // its pending event is the delivery
}

void FluidNetwork::settle(std::uint32_t f) {
  Flow& fl = slot(f);
  const Time now = engine_.now();
  double sent;
  if (now >= fl.send_end) {
    sent = fl.remaining;
  } else {
    sent = std::min(fl.remaining, fl.rate * (now - fl.settled).seconds());
  }
  fl.remaining -= sent;
  fl.settled = now;
  if (sent > 0)
    for (LinkId l : fl.links) links_[l].bytes += sent;
}

double FluidNetwork::bottleneck(const Flow& fl) const {
  double rate = std::numeric_limits<double>::infinity();
  for (LinkId l : fl.links) rate = std::min(rate, links_[l].capacity);
  return rate;
}

void FluidNetwork::set_rate(std::uint32_t f, double rate, bool lazy) {
  Flow& fl = slot(f);
  MLSIM_CHECK(rate > 0 && std::isfinite(rate), "flow rate must be positive");
  if (fl.rate > 0) settle(f);  // a flow that had no rate yet has sent nothing
  fl.rate = rate;
  fl.lazy = lazy;
  fl.send_end = engine_.now() + Time::from_seconds_ceil(fl.remaining / rate);
  // A lazy flow's only event is its delivery; a sharing flow's is the end of its sending.
  reschedule(f, lazy ? fl.send_end + fl.latency : fl.send_end);
}

void FluidNetwork::start_period(LinkId l, Time send_end) {
  LinkState& ls = links_[l];
  const Time now = engine_.now();
  if (now >= ls.period_end) {
    ls.busy_closed_ns += (ls.period_end - ls.period_start).count_ns();
    ls.period_start = now;
    ls.period_end = send_end;
  } else {
    ls.period_end = std::max(ls.period_end, send_end);
  }
}

void FluidNetwork::refresh_period(LinkId l) {
  LinkState& ls = links_[l];
  const Time now = engine_.now();
  // Members of route classes send until their class event removes them: the period stays open
  // (it closes at the solve that follows the last one's end, at that instant).
  Time latest = ls.classes.empty() ? now : Time::max();
  for (const Entry& e : ls.flows) latest = std::max(latest, slot(e.flow).send_end);
  if (ls.period_end > now) {
    ls.period_end = latest;  // the past of the period is settled; only its end moves
  } else if (latest > now) {
    start_period(l, latest);
  }
}

void FluidNetwork::rebalance(std::span<const LinkId> seeds, double floor) {
  if (sharing_ == Sharing::kMaxMin) {
    // Solved once for every change at this instant (a burst of starts costs one solve, not one
    // per start), before time moves on: rates only matter over elapsed time.
    pending_seeds_.insert(pending_seeds_.end(), seeds.begin(), seeds.end());
    if (floor == kArrival) {
      pending_arrival_ = true;
    } else {
      pending_floor_ = std::min(pending_floor_, floor);
    }
    if (!solve_armed_) {
      solve_armed_ = true;
      solve_wake_ = Wake{engine_.now().count_ns(), ++wake_seq_};
      arm_wakeup();
    }
    return;
  }
  // Analytic: a flow's rate is its bottleneck, whoever else is on the link.
  next_stamp();
  component_links_.clear();
  auto note = [&](LinkId l) {
    if (links_[l].stamp != stamp_) {
      links_[l].stamp = stamp_;
      component_links_.push_back(l);
    }
  };
  for (LinkId l : seeds) note(l);
  for (std::size_t i = 0, n = component_links_.size(); i < n; ++i) {
    for (const Entry& e : links_[component_links_[i]].flows) {
      Flow& g = slot(e.flow);
      if (!still_sending(g) || g.stamp == stamp_) continue;
      g.stamp = stamp_;
      const double r = bottleneck(g);
      if (r != g.rate || !has_timer(e.flow)) {
        set_rate(e.flow, r, true);
        for (LinkId m : g.links) note(m);
      }
    }
  }
  for (LinkId l : component_links_) refresh_period(l);
}

double FluidNetwork::arrival_floor(std::span<const LinkId> seeds) {
  // Transfers that start now change no rate below the lowest level X at which a link of theirs
  // could fill: up to X the filling runs as before on every other link, and on a link l of
  // theirs the load at level x is
  //     sum over the transfers already rated of min(rate, x)  +  x per transfer not yet rated,
  // which stays below the capacity for x < X_l (the old rates are the max-min rates of the state
  // without the new transfers: those below X_l are final by the same argument). A class that
  // gained a member counts it at the class's old rate r, which is exact below r, and X < r: on
  // the class's bottleneck, full at r before, the new member overfills the link at level r.
  // X_l is at least capacity / transfers on the link, the bound used before.
  // Small neighbourhoods are solved whole (solve_in_place): no floor to compute (the groups
  // case: 5% of its instructions went here for nothing).
  std::size_t near = 0;
  for (LinkId l : seeds) near += links_[l].classes.size() + links_[l].flows.size();
  if (near < kPartialSolveMin) return 0;
  double floor = std::numeric_limits<double>::infinity();
  next_stamp();
  for (LinkId l : seeds) {
    LinkState& ls = links_[l];
    if (ls.stamp == stamp_) continue;
    ls.stamp = stamp_;
    rated_.clear();
    double unrated = 0, weight = 0;
    for (const Entry& e : ls.flows) {
      const Flow& g = slot(e.flow);
      if (!still_sending(g)) continue;
      if (g.rate > 0) {
        rated_.push_back(Rated{g.rate, 1});
      } else {
        unrated += 1;
      }
    }
    for (const ClassEntry& e : ls.classes) {
      const ClassSolve& cs = class_solve_[e.route_class];
      const auto w = static_cast<double>(cs.weight);
      if (const double rate = cs.group == kNoSlot ? 0.0 : groups_[cs.group].rate; rate > 0) {
        rated_.push_back(Rated{rate, w});
      } else {
        unrated += w;
      }
    }
    for (const Rated& r : rated_) weight += r.weight;
    std::sort(rated_.begin(), rated_.end(),
              [](const Rated& a, const Rated& b) { return a.rate < b.rate; });
    // The level on this link alone: rated transfers below it take their rate, the others it.
    double below = 0, level = 0;
    double m = unrated + weight;
    std::size_t i = 0;
    for (; i < rated_.size(); ++i) {
      level = (ls.capacity - below) / m;
      if (level <= rated_[i].rate) break;
      below += rated_[i].rate * rated_[i].weight;
      m -= rated_[i].weight;
    }
    if (i == rated_.size()) {
      if (m == 0) continue;  // all its transfers are rated and it is not full: it never fills
      level = (ls.capacity - below) / m;
    }
    // Less a margin for the rounding of `below` (the solve redoes what is within 1e-9 of it).
    floor = std::min(floor, level - 1e-12 * ls.capacity);
  }
  return std::max(floor, 0.0);
}

void FluidNetwork::begin_component(std::span<const LinkId> seeds) {
  next_stamp();
  stack_.clear();
  component_links_.clear();
  component_flows_.clear();
  component_classes_.clear();
  for (LinkId l : seeds) visit_link(l);
}

void FluidNetwork::solve_component(std::span<const LinkId> seeds, double floor) {
  if (route_classes_) {
    solve_in_place(seeds, floor);
    return;
  }
  // Without route classes: every transfer connected to the seeds through shared links is solved
  // again, by a MaxMinSolver problem built for the component (the computation the shipped
  // scenarios' results were recorded with).
  begin_component(seeds);
  while (!stack_.empty()) {
    const LinkId l = stack_.back();
    stack_.pop_back();
    component_links_.push_back(l);
    for (const Entry& e : links_[l].flows) {
      Flow& g = slot(e.flow);
      if (g.stamp == stamp_ || !still_sending(g)) continue;
      g.stamp = stamp_;
      component_flows_.push_back(e.flow);
      for (LinkId m : g.links) visit_link(m);
    }
  }
  solver_.clear();
  for (LinkId l : component_links_) local_index_[l] = solver_.add_link(links_[l].capacity);
  for (std::uint32_t g : component_flows_) {
    local_links_.clear();
    for (LinkId m : slot(g).links) local_links_.push_back(local_index_[m]);
    solver_.add_flow(local_links_);
  }
  const std::vector<double>& rates = solver_.solve();
  for (std::size_t i = 0; i < component_flows_.size(); ++i)
    slot(component_flows_[i]).new_rate = rates[i];
  ++solve_stats_.solves;
  solve_stats_.solved += component_flows_.size();
  apply_rates();
}

bool FluidNetwork::crowded(std::span<const LinkId> route) const {
  for (LinkId l : route)
    if (links_[l].flows.size() + links_[l].members >= kClassMinLoad) return true;
  return false;
}

void FluidNetwork::solve_in_place(std::span<const LinkId> seeds, double floor) {
  // Which rates can change. Progressive filling freezes flows in increasing order of rate; a
  // flow leaving at rate r changes nothing that froze below r (its links fill at r or later,
  // with or without it), and a flow arriving changes nothing below its own new rate, which is
  // at least `arrival_floor`. So only classes and transfers at or above `floor` are solved
  // again, connected through ones at or above it, on the capacity the others leave (their
  // rates are kept). Small neighbourhoods are solved whole (floor 0), as are link changes and
  // reroutes.
  std::size_t near = 0;
  for (LinkId l : seeds) near += links_[l].classes.size() + links_[l].flows.size();
  if (near < kPartialSolveMin || !(floor < std::numeric_limits<double>::infinity())) floor = 0;
  const double keep_below = floor * (1 - 1e-9);  // rates within rounding of the floor are redone
  if (fill_.size() != links_.size()) fill_.resize(links_.size());
  if (fill_saved_) {
    if (restart_fill(seeds, floor, keep_below)) return;
    drop_saved_fill();
  }
  solve_full_ = floor == 0;
  // The component, and in the same pass each of its links' capacity left by what is kept and
  // its count of what is solved: route classes, and transfers on the links' own lists (lazy
  // ones, ones below kClassMinLoad, or ones just rerouted or started).
  begin_component(seeds);
  while (!stack_.empty()) {
    const LinkId l = stack_.back();
    stack_.pop_back();
    component_links_.push_back(l);
    const LinkState& ls = links_[l];
    double left = ls.capacity;
    std::uint32_t unfrozen = 0;
    for (const Entry& e : ls.flows) {
      Flow& g = slot(e.flow);
      if (!still_sending(g)) continue;
      if (g.stamp != stamp_) {
        if (g.rate > 0 && g.rate < keep_below) {  // kept at its rate (never stamped)
          left -= g.rate;
          continue;
        }
        g.stamp = stamp_;
        g.new_rate = -1;
        component_flows_.push_back(e.flow);
        for (LinkId m : g.links) visit_link(m);
      }
      ++unfrozen;
    }
    for (const ClassEntry& e : ls.classes) {
      ClassSolve& cs = class_solve_[e.route_class];
      if (cs.stamp != stamp_) {
        // A kept class is decided from this record and its group's rate alone.
        if (const double rate = cs.group == kNoSlot ? 0.0 : groups_[cs.group].rate;
            rate > 0 && rate < keep_below) {
          left -= rate * static_cast<double>(cs.weight);
          continue;
        }
        cs.stamp = stamp_;
        cs.new_rate = -1;
        component_classes_.push_back(e.route_class);
        for (LinkId m : solve_route(e.route_class, cs)) visit_link(m);
      }
      unfrozen += cs.weight;
    }
    if (floor > 0) left = std::max(left, ls.capacity * 1e-12);  // rounding, never below 0
    fill_[l].left = left;
    fill_[l].unfrozen = unfrozen;
  }
  // A component of route classes alone, large enough for a restart to pay: its filling is saved.
  auto classes_alone = [this] {  // no transfer of its own on a link of the component
    for (LinkId l : component_links_)
      if (!links_[l].flows.empty()) return false;
    return true;
  };
  if (fill_restart_ && component_classes_.size() >= kPartialSolveMin && classes_alone()) {
    // In id order, so that every restarted scan finds its links sorted (fill_by_scan).
    std::sort(component_links_.begin(), component_links_.end());
    ++saved_gen_;
    for (LinkId l : component_links_) link_saved_[l] = saved_gen_;
    saved_links_.assign(component_links_.begin(), component_links_.end());
    steps_.clear();
    undo_top_ = 0;
    order_top_ = 0;
    for (std::uint32_t c : new_classes_)
      if (class_solve_[c].order_pos == kFresh) class_solve_[c].order_pos = kNoSlot;
    new_classes_.clear();
    pending_order_cut_ = kNoSlot;
    saved_base_ = keep_below;
    fill_saved_ = true;
    logging_ = true;
    reserve_log();
  }
  const std::uint32_t round_before = fill_round_;
  fill_in_place();
  solve_stats_.one_step += fill_round_ - round_before == 1 ? 1 : 0;
  logging_ = false;
  ++solve_stats_.solves;
  solve_stats_.partial += floor > 0 ? 1 : 0;
  solve_stats_.solved += component_flows_.size() + component_classes_.size();
  apply_rates();
}

bool FluidNetwork::route_touches_saved(std::span<const LinkId> route) const {
  if (!fill_saved_) return false;
  for (LinkId l : route)
    if (link_in_saved(l)) return true;
  return false;
}

void FluidNetwork::note_saved_class_change(std::uint32_t c) {
  const std::uint32_t p = class_solve_[c].order_pos;
  if (p == kFresh) return;  // unfrozen from the start of the restart anyway
  if (p < order_top_ && frozen_order_[p] == c) {
    pending_order_cut_ = std::min(pending_order_cut_, p);
    return;
  }
  // A class the saved filling kept at its rate (below its base), or of another component.
  const RouteClass& rc = route_class(c);
  if (route_touches_saved(std::span<const LinkId>(rc.links.begin(), rc.links.size())))
    drop_saved_fill();
}

bool FluidNetwork::restart_fill(std::span<const LinkId> seeds, double floor, double keep_below) {
  if (!fill_saved_ || keep_below < saved_base_) return false;
  for (LinkId l : seeds)
    if (!link_in_saved(l)) return false;
  // The first step at or above the floor, and at or before every changed class's step: the
  // filling is the same before it (the argument of solve_in_place's floor).
  std::size_t k = 0;
  while (k < steps_.size() && steps_[k].level < keep_below) ++k;
  auto order_begin = [this](std::size_t j) {
    return j < steps_.size() ? steps_[j].order_begin : order_top_;
  };
  while (k > 0 && order_begin(k) > pending_order_cut_) --k;
  const std::uint32_t from = order_begin(k);
  const std::uint32_t undo_from = k < steps_.size() ? steps_[k].undo_begin : undo_top_;
  // Local pointers: the stores below would otherwise make the compiler reload the vectors.
  FillLink* const fill = fill_.data();
  for (const FillUndo* u = undo_.data() + undo_top_; u-- != undo_.data() + undo_from;)
    fill[u->link].left = u->left;
  undo_top_ = undo_from;
  // What is solved again: the classes frozen from step k on, and the classes made since.
  next_stamp();
  component_links_.assign(saved_links_.begin(), saved_links_.end());
  component_flows_.clear();
  component_classes_.resize(order_top_ - from + new_classes_.size());
  for (LinkId l : saved_links_) fill[l].unfrozen = 0;
  ClassSolve* const solve = class_solve_.data();
  const LinkId* const routes = class_route_.data();
  std::uint32_t* const taken = component_classes_.data();
  std::size_t n = 0, entries = 0;
  const std::uint32_t stamp = stamp_;
  // Inlined in both loops below (GCC, left to itself, made it a call: 16 M more instructions on
  // star 1 k).
  auto take = [&](std::uint32_t c) __attribute__((always_inline)) {
    ClassSolve& cs = solve[c];
    cs.stamp = stamp;
    cs.new_rate = -1;
    cs.order_pos = kNoSlot;
    taken[n++] = c;
    entries += cs.hops;
    if (cs.hops == 2) {  // unrolled, as in freeze_at
      const LinkId* const route = routes + std::size_t{c} * kRouteStride;
      fill[route[0]].unfrozen += cs.weight;
      fill[route[1]].unfrozen += cs.weight;
    } else {
      for (LinkId m : solve_route(c, cs)) fill[m].unfrozen += cs.weight;
    }
  };
  const std::uint32_t* const order = frozen_order_.data();
  for (std::uint32_t i = from; i < order_top_; ++i)
    if (const std::uint32_t c = order[i]; solve[c].order_pos == i) take(c);
  for (std::uint32_t c : new_classes_)
    if (const ClassSolve& cs = solve[c];
        cs.order_pos == kFresh && cs.weight > 0 && cs.stamp != stamp)
      take(c);
  component_classes_.resize(n);
  order_top_ = from;
  steps_.resize(k);
  new_classes_.clear();
  pending_order_cut_ = kNoSlot;
  if (floor > 0)  // as the gathering's: rounding, never below 0
    for (LinkId l : saved_links_) fill[l].left = std::max(fill[l].left, links_[l].capacity * 1e-12);
  if (undo_.size() < undo_top_ + entries) undo_.resize(undo_top_ + entries);
  if (frozen_order_.size() < order_top_ + n) frozen_order_.resize(order_top_ + n);
  solve_full_ = false;  // apply_class_rates counts the classes of each group solved again
  logging_ = true;
  count_at_freeze_ = freeze_counts_;
  lone_seen_ = false;
  const std::uint32_t round_before = fill_round_;
  fill_in_place();
  solve_stats_.one_step += fill_round_ - round_before == 1 ? 1 : 0;
  count_at_freeze_ = false;
  counted_at_freeze_ = freeze_counts_;
  logging_ = false;
  ++solve_stats_.solves;
  ++solve_stats_.restarted;
  solve_stats_.partial += k > 0 || saved_base_ > 0 ? 1 : 0;
  solve_stats_.solved += component_classes_.size();
  apply_rates();
  return true;
}

template <bool kTouch, bool kLog, bool kCount>
void FluidNetwork::freeze_at(LinkId l, double share) {
  // Freezes the transfers and classes of this solve still unfrozen on l at `share`: each gives
  // its rate to the links of its route (their capacity left and unfrozen count drop). With
  // kTouch (the heap filling), the links whose share moved are listed in `touched_`. With kLog,
  // the step, the classes it froze and the capacity left it overwrote are recorded (restart_fill;
  // the buffers were sized for the solve by reserve_log, so they are written through pointers).
  ++fill_round_;
  touched_.clear();
  if constexpr (kLog) steps_.push_back(FillStep{share, undo_top_, order_top_});
  auto touch = [this](LinkId m) {
    if (fill_[m].round == fill_round_) return;
    fill_[m].round = fill_round_;
    touched_.push_back(m);
  };
  for (const Entry& e : links_[l].flows) {
    Flow& g = slot(e.flow);
    if (g.stamp != stamp_ || g.new_rate >= 0) continue;
    g.new_rate = share;
    g.new_bottleneck = l;
    for (LinkId m : g.links) {
      FillLink& fm = fill_[m];
      fm.left -= share;
      --fm.unfrozen;
      if constexpr (kTouch) {
        touch(m);
      } else if constexpr (kLog) {  // the scan's key, kept current (fill_by_scan)
        scan_key_[fm.place] = scan_share(fm);
      } else {
        fm.key = fm.left / fm.unfrozen;
      }
    }
  }
  FillUndo* undo = kLog ? undo_.data() + undo_top_ : nullptr;
  std::uint32_t* const order = frozen_order_.data();
  std::uint32_t top = order_top_;
  // Group counts (kCount, count_at_freeze_): the classes in l's group are counted in `here`.
  // (With here_group kNoSlot, `here` counts classes of no group, and is not added.)
  const std::uint32_t here_group = kCount ? group_of_link_[l] : kNoSlot;
  const std::uint32_t top_begin = top;
  std::uint32_t others = 0;
  const bool one_class = kCount && links_[l].classes.size() == 1 && links_[l].flows.empty();
  // Locals: the stores to the classes' and links' fields below (uint32 and double) would
  // otherwise make the compiler reload these at every class entry.
  ClassSolve* const solve = class_solve_.data();
  FillLink* const fill = fill_.data();
  double* const keys = scan_key_.data();
  const LinkId* const routes = class_route_.data();
  const std::uint32_t open = stamp_, frozen = stamp_ + 1;  // see next_stamp
  for (const ClassEntry& e : links_[l].classes) {
    const std::uint32_t c = e.route_class;
    ClassSolve& cs = solve[c];
    if (cs.stamp != open) continue;  // not in this solve, or frozen already
    cs.stamp = frozen;
    cs.new_rate = share;
    cs.bottleneck = l;
    if constexpr (kCount) {  // the others are counted after the walk, as `here`
      if (const std::uint32_t g = cs.group; g != here_group) [[unlikely]] {
        ++others;
        if (g != kNoSlot) count_in_group(g, 1);
      }
    }
    const std::uint32_t weight = cs.weight;
    const double taken = share * static_cast<double>(weight);
    if constexpr (kLog) {
      cs.order_pos = top;
      order[top++] = c;
    }
    const std::uint32_t hops = cs.hops;
    auto give = [&](LinkId m, [[maybe_unused]] FillUndo* u) {  // the class's rate leaves m
      FillLink& fm = fill[m];
      if constexpr (kLog) *u = FillUndo{fm.left, m};
      fm.left -= taken;
      fm.unfrozen -= weight;
      if constexpr (kTouch) {
        touch(m);
      } else if constexpr (kLog) {  // the scan's key, kept current (fill_by_scan)
        keys[fm.place] = scan_share(fm);
      } else {
        fm.key = fm.left / fm.unfrozen;
      }
    };
    // Routes of two links (hosts under one switch; every route of the benchmark's star) are
    // unrolled: the loop's control was about a fifth of a freeze's instructions there.
    if (hops == 2) {
      const LinkId* const route = routes + std::size_t{c} * kRouteStride;
      give(route[0], undo);
      give(route[1], kLog ? undo + 1 : nullptr);
    } else {
      const LinkId* const route = hops <= kRouteStride ? routes + std::size_t{c} * kRouteStride
                                                       : route_class(c).links.begin();
      for (std::uint32_t j = 0; j < hops; ++j) give(route[j], kLog ? undo + j : nullptr);
    }
    if constexpr (kLog) undo += hops;
  }
  if constexpr (kCount) {
    static_assert(kLog, "the counts at the freeze are of a logged filling");
    const std::uint32_t here = top - top_begin - others;
    if (here != 0 && here_group != kNoSlot) count_in_group(here_group, here);
    // A lone class freezes at a link of no other class: the only class on l (if it is in this
    // solve, this step froze it).
    if (one_class) {
      const std::uint32_t c = links_[l].classes[0].route_class;
      if (const ClassSolve& cs = class_solve_[c]; cs.stamp == frozen && lone_class(c, cs))
        lone_seen_ = true;
    }
  }
  if constexpr (kLog) {
    undo_top_ = static_cast<std::uint32_t>(undo - undo_.data());
    order_top_ = top;
  }
}

void FluidNetwork::reserve_log() {
  // Room for every class of the solve to be frozen once, with an entry per link of its route.
  std::size_t entries = 0;
  for (std::uint32_t c : component_classes_) entries += class_solve_[c].hops;
  if (undo_.size() < undo_top_ + entries) undo_.resize(undo_top_ + entries);
  if (frozen_order_.size() < order_top_ + component_classes_.size())
    frozen_order_.resize(order_top_ + component_classes_.size());
}

template <bool kLog, bool kCount>
void FluidNetwork::fill_by_scan() {
  // The filling of fill_in_place for a component of few links: the next link to freeze is the
  // least (left / unfrozen, link id) among the links still unfrozen, which is the link the heap
  // gives (its top is the least current share, ties on the link id: see fill_in_place), with the
  // same share, so the filling freezes the same links in the same order at the same levels. Each
  // link's share is kept current by freeze_at (kTouch false) after each change of its capacity
  // left or count: the same division of the same values as computing it in the scan, so the
  // same bits, one division per link a freeze changes instead of one per link still unfrozen at
  // every step (docs/performance.md, 2026-12-07 helper D).
  // A logged filling (a saved one, and its restarts: star 1 k, 41 steps a solve over about 46
  // links) keeps the shares in the flat `scan_key_`, by place in the scan (FillLink::place), the
  // links in increasing id order; a link with nothing left unfrozen has the share +infinity. The
  // scan is then a minimum over an array of doubles with no test per link (first_least: two SSE2
  // lanes at a time), and the first index holding it is the least (share, link id). Before, the
  // scan read each link's record, tested its count and broke ties per link: about 440
  // instructions a step against 190 (docs/performance.md, 2026-12-07 evening).
  if constexpr (!kLog) {
    // A filling not saved (small components: the groups case solves 4 classes at each start
    // and end): each link's share in FillLink::key, the links still unfrozen scanned through
    // the link records, and the dead ones dropped as met; its set-up is cheaper than the
    // flat array's below (sorting, places), which only a long filling repays.
    scan_links_.clear();
    for (LinkId l : component_links_)
      if (FillLink& fl = fill_[l]; fl.unfrozen != 0) {
        fl.key = fl.left / fl.unfrozen;
        scan_links_.push_back(l);
      }
    // The links still unfrozen are scan[0, n); plain pointers and a local count, as freeze_at's
    // stores would otherwise make the compiler reload the vectors at every link scanned.
    LinkId* const scan = scan_links_.data();
    std::size_t n = scan_links_.size();
    while (n > 0) {
      // Shares are finite (unfrozen > 0), so the first link scanned replaces the infinite start.
      const FillLink* const fill = fill_.data();
      std::size_t best = 0;
      double best_key = std::numeric_limits<double>::infinity();
      LinkId best_link = ~LinkId{0};
      for (std::size_t i = 0; i < n;) {
        const LinkId l = scan[i];
        const FillLink& fl = fill[l];
        if (fl.unfrozen == 0) {  // all its flows were frozen by other links
          scan[i] = scan[--n];
          continue;
        }
        // The least (key, link id); most links are above the least so far, tested first.
        if (const double key = fl.key; !(key > best_key) && (key < best_key || l < best_link)) {
          best = i;
          best_key = key;
          best_link = l;
        }
        ++i;
      }
      if (n == 0) break;
      scan[best] = scan[--n];
      freeze_at<false, kLog, kCount>(best_link, std::max(0.0, best_key));
    }
  } else {
    scan_links_.clear();
    for (LinkId l : component_links_)
      if (fill_[l].unfrozen != 0) scan_links_.push_back(l);
    LinkId* const scan = scan_links_.data();
    const std::size_t n = scan_links_.size();
    // Saved fillings keep their links sorted (solve_in_place); other components are small.
    if (!std::is_sorted(scan, scan + n)) std::sort(scan, scan + n);
    // Slot n takes the keys of the component's links outside the scan (no unfrozen flow: a freeze
    // never changes them, but a class of weight 0 would still write there).
    scan_key_.resize(n + 1);
    double* const keys = scan_key_.data();
    for (LinkId l : component_links_) fill_[l].place = static_cast<std::uint32_t>(n);
    for (std::size_t i = 0; i < n; ++i) {
      FillLink& fl = fill_[scan[i]];
      fl.place = static_cast<std::uint32_t>(i);
      keys[i] = fl.left / fl.unfrozen;
    }
    constexpr double kInf = std::numeric_limits<double>::infinity();
    for (;;) {
      std::size_t best = first_least(keys, n);
      if (best == n) {
        // Every share is +infinity: done, unless a link still unfrozen has an infinite share (a
        // link of infinite capacity); the first such is the least (share, link id).
        best = 0;
        while (best < n && fill_[scan[best]].unfrozen == 0) ++best;
        if (best == n) break;
      }
      freeze_at<false, kLog, kCount>(scan[best], std::max(0.0, keys[best]));
      keys[best] = kInf;  // frozen (its count is 0 now)
    }
  }
}

void FluidNetwork::fill_in_place() {
  // Progressive filling as in MaxMinSolver::solve (max_min.hpp: a heap of links on (share, link
  // id) with lazily refreshed keys), on the backend's lists: the transfers and classes of this
  // solve carry the current stamp (a class's in `class_solve_`), and `new_rate` < 0 until frozen.
  // The heap holds each link's key next to its id, so a comparison reads no FillLink (a 4-ary
  // heap was tried: 2.7% more instructions on star 1 k, no gain in time). Ties break on the
  // link id, a total order, so links leave in the same order as from any heap of these keys.
  // Why the top is the least current share: a key is the link's share when last computed, and
  // every change of the link's share after that either recomputed it (lowered) or marked it
  // stale (risen, the key a lower bound); a stale top is refreshed before it is taken.
  if (component_links_.size() <= scan_fill_max_) {
    if (count_at_freeze_) {
      fill_by_scan<true, true>();
    } else if (logging_) {
      fill_by_scan<true, false>();
    } else {
      fill_by_scan<false, false>();
    }
    return;
  }
  auto less = [](const FillItem& a, const FillItem& b) {
    return a.key < b.key || (a.key == b.key && a.link < b.link);
  };
  auto place = [this](std::size_t i, const FillItem& item) {
    fill_heap_[i] = item;
    fill_[item.link].place = static_cast<std::uint32_t>(i);
  };
  fill_heap_.clear();
  for (LinkId l : component_links_) {
    FillLink& fl = fill_[l];
    if (fl.unfrozen == 0) continue;
    fl.key = fl.left / fl.unfrozen;
    fl.stale = false;
    fl.place = static_cast<std::uint32_t>(fill_heap_.size());
    fill_heap_.push_back(FillItem{fl.key, l});
  }
  for (std::size_t i = (fill_heap_.size() + kFillArity - 2) / kFillArity; i-- > 0;)
    heap::sift_down<kFillArity>(fill_heap_, i, less, place);
  while (!fill_heap_.empty()) {
    const LinkId l = fill_heap_.front().link;
    FillLink& fl = fill_[l];
    if (fl.unfrozen == 0) {  // all its flows were frozen by other links
      heap::erase_at<kFillArity>(fill_heap_, 0, less, place);
      continue;
    }
    if (fl.stale) {  // its share rose since its key was computed: refresh it in place
      fl.key = fl.left / fl.unfrozen;
      fl.stale = false;
      fill_heap_.front().key = fl.key;
      heap::sift_down<kFillArity>(fill_heap_, 0, less, place);
      continue;
    }
    heap::erase_at<kFillArity>(fill_heap_, 0, less, place);
    if (logging_) {
      if (count_at_freeze_) {
        freeze_at<true, true, true>(l, std::max(0.0, fl.left / fl.unfrozen));
      } else {
        freeze_at<true, true, false>(l, std::max(0.0, fl.left / fl.unfrozen));
      }
    } else {
      freeze_at<true, false, false>(l, std::max(0.0, fl.left / fl.unfrozen));
    }
    for (LinkId m : touched_) {
      FillLink& fm = fill_[m];
      if (m == l || fm.unfrozen == 0) continue;
      const double now = fm.left / fm.unfrozen;
      if (now < fm.key) {  // lowered by rounding: the key must not stay above the share
        fm.key = now;
        fm.stale = false;
        fill_heap_[fm.place].key = now;
        heap::sift_up<kFillArity>(fill_heap_, fm.place, less, place);
      } else {
        fm.stale = now != fm.key;
      }
    }
  }
}

void FluidNetwork::apply_rates() {
  apply_class_rates();
  for (LinkId l : component_links_) refresh_period(l);
}

void FluidNetwork::apply_class_rates() {
  MLSIM_CHECK(waking_, "a solve runs inside wake_up");
  // Classes first: a transfer below may join one of them, at its new rate. First pass: the last
  // member of a route with nobody left to share with becomes a lone transfer again; the other
  // classes are counted in their rate group, so that a group all of whose classes were solved
  // again can change its rate in place.
  // Both passes read the class's compact record and its group; the class record itself only
  // where a class of one member may be alone, or moves between groups.
  // A restarted solve counted them at the freeze: the pass runs only for a lone class.
  const bool recount = counted_at_freeze_ && take_freeze_counts();
  if (!counted_at_freeze_ || recount) {
    for (const std::uint32_t c : component_classes_) {
      ClassSolve& cs = class_solve_[c];
      bool alone = cs.weight == 1;
      if (alone) {
        for (LinkId m : solve_route(c, cs)) {
          if (links_[m].classes.size() != 1 || !links_[m].flows.empty()) {
            alone = false;
            break;
          }
        }
      }
      if (alone) {
        RouteClass& rc = route_class(c);
        const std::uint32_t g = rc.members[0].flow;
        Flow& gl = slot(g);
        const double had = class_rate(rc);
        gl.remaining = leave_class(g);  // frees the class
        attach(g, std::span<const LinkId>(gl.links.begin(), gl.links.size()));
        gl.rate = had;
        gl.settled = engine_.now();
        gl.send_end = Time::max();
        gl.lazy = false;
        set_rate(g, cs.new_rate, true);
        cs.new_rate = -1;  // done
        continue;
      }
      if (cs.group != kNoSlot && !solve_full_) {  // full solves count lazily (counted_group)
        RateGroup& gr = groups_[cs.group];
        if (gr.stamp != stamp_) {
          gr.stamp = stamp_;
          gr.in_solve = 0;
        }
        ++gr.in_solve;
      }
    }
  }
  counted_at_freeze_ = false;
  if (recount) check_recount();
  // Second pass: each class goes to the group of the link that froze it (where it mostly is
  // already: then nothing is done for it, and the group's rate change re-timed it).
  for (const std::uint32_t c : component_classes_) {
    const ClassSolve& cs = class_solve_[c];
    if (cs.new_rate < 0) continue;
    const std::uint32_t group = cs.group;
    if (group != kNoSlot) {
      RateGroup& gr = groups_[group];
      if (std::fabs(cs.new_rate - gr.rate) <= kRateTolerance * gr.rate) {
        // Its rate stays (within rounding, as a class's rate stayed before groups): it keeps its
        // group, without target_group's bookkeeping. If another link froze it this time (a tie
        // between equally loaded links, in the groups case about one move in five), the group
        // must keep its rate in this solve: it no longer counts as wholly re-solved.
        if (gr.link != cs.bottleneck && counted_group(group).stamp == stamp_) --gr.in_solve;
        continue;
      }
    }
    if (group != kNoSlot && relabel_alone(group, cs.bottleneck, cs.new_rate)) continue;
    const std::uint32_t target = target_group(cs.bottleneck, cs.new_rate);
    if (group == target) continue;
    if (group != kNoSlot) {
      RateGroup& old = counted_group(group);
      if (old.stamp == stamp_) --old.in_solve;
      leave_group(c);
    }
    enter_group(c, target);
  }
  for (const std::uint32_t g : component_flows_) {
    Flow& gl = slot(g);
    const double rate = gl.new_rate;
    bool alone = true;
    for (LinkId m : gl.links)
      alone = alone && links_[m].flows.size() == 1 && links_[m].classes.empty();
    // Without classes, or where its links are not crowded, a sharing transfer has its own event.
    if (alone || !route_classes_ || !crowded(gl.links)) {
      const bool changed = std::fabs(rate - gl.rate) > kRateTolerance * gl.rate;
      if (changed || alone != gl.lazy || !has_timer(g)) set_rate(g, rate, alone);
      continue;
    }
    // It shares a crowded link: into its route's class (a new class takes the transfer's rate,
    // which is what the solve gave its route).
    if (gl.rate > 0) settle(g);
    cancel_timer(g);
    detach(g);
    gl.lazy = false;
    join_class(g, gl.remaining);
    const std::uint32_t c = gl.route_class;
    if (route_class(c).group == kNoSlot) enter_group(c, target_group(gl.new_bottleneck, rate));
  }
}

bool FluidNetwork::take_freeze_counts() {
  ++solve_stats_.counted_at_freeze;
  if (!lone_seen_) return false;
  // A lone class: the first pass runs as before, on counts reset (stamp 0 is no solve's).
  ++solve_stats_.lone_recounts;
  for (const std::uint32_t c : component_classes_)
    if (const std::uint32_t g = class_solve_[c].group; g != kNoSlot) groups_[g].stamp = 0;
  return true;
}

void FluidNetwork::check_recount() const {
  // The counts were reset before the pass: a group counted beyond its classes would hide one
  // that was kept (a stale count from the filling).
  for (const std::uint32_t c : component_classes_) {
    const std::uint32_t g = class_solve_[c].group;
    MLSIM_CHECK(g == kNoSlot || groups_[g].stamp != stamp_ ||
                    groups_[g].in_solve <= groups_[g].classes.size(),
                "a rate group's classes in the solve are counted once");
  }
}

// ---- Route classes ------------------------------------------------------------------------------

namespace {
std::uint64_t route_hash(std::span<const LinkId> route) {
  std::uint64_t h = 0x9e3779b97f4a7c15ULL ^ route.size();
  for (LinkId l : route) {
    h ^= l + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h *= 0xbf58476d1ce4e5b9ULL;
  }
  return h ^ (h >> 31);
}
}  // namespace

std::uint32_t FluidNetwork::find_or_add_class(std::span<const LinkId> route) {
  const std::uint64_t h = route_hash(route);
  auto [it, inserted] = class_by_hash_.try_emplace(h, kNoSlot);
  for (std::uint32_t c = it->second; c != kNoSlot; c = route_class(c).next_same_hash) {
    const RouteClass& rc = route_class(c);
    if (std::equal(rc.links.begin(), rc.links.end(), route.begin(), route.end())) return c;
  }
  std::uint32_t c;
  if (!free_classes_.empty()) {
    c = free_classes_.back();
    free_classes_.pop_back();
  } else {
    MLSIM_CHECK(classes_used_ < kNoSlot, "too many route classes");
    if ((classes_used_ >> kChunkBits) >= class_chunks_.size())
      class_chunks_.push_back(std::make_unique<RouteClass[]>(std::size_t{1} << kChunkBits));
    c = classes_used_++;
  }
  if (class_solve_.size() <= c) class_solve_.resize(std::size_t{c} + 1);
  class_solve_[c].group = kNoSlot;
  class_solve_[c].weight = 0;
  class_solve_[c].hops = static_cast<std::uint32_t>(route.size());
  class_solve_[c].order_pos = kNoSlot;
  if (fill_saved_ && route_touches_saved(route)) {
    // New on the saved filling's links: unfrozen from the start of any restart. A route that
    // leaves those links joins another component to them: the saved filling no longer applies.
    bool inside = true;
    for (LinkId l : route) inside = inside && link_in_saved(l);
    if (inside) {
      class_solve_[c].order_pos = kFresh;
      new_classes_.push_back(c);
    } else {
      drop_saved_fill();
    }
  }
  if (route.size() <= kRouteStride) {
    if (class_route_.size() < (std::size_t{c} + 1) * kRouteStride)
      class_route_.resize((std::size_t{c} + 1) * kRouteStride);
    std::copy(route.begin(), route.end(), class_route_.begin() + std::size_t{c} * kRouteStride);
  }
  RouteClass& rc = route_class(c);
  rc.links.assign(route.begin(), route.end());
  rc.pos.resize(route.size());
  rc.members.clear();
  rc.sent = 0;
  rc.offset = 0;
  rc.counted = 0;
  rc.group = kNoSlot;
  rc.hash = h;
  rc.next_same_hash = it->second;
  it->second = c;
  for (std::uint32_t i = 0; i < route.size(); ++i) {
    auto& list = links_[route[i]].classes;
    rc.pos[i] = static_cast<std::uint32_t>(list.size());
    list.push_back(ClassEntry{c, i});
  }
  return c;
}

void FluidNetwork::free_class(std::uint32_t c) {
  leave_group(c);
  class_solve_[c].order_pos = kNoSlot;
  RouteClass& rc = route_class(c);
  for (std::uint32_t i = 0; i < rc.links.size(); ++i) {
    auto& list = links_[rc.links[i]].classes;
    const ClassEntry last = list.back();
    list[rc.pos[i]] = last;
    route_class(last.route_class).pos[last.hop] = rc.pos[i];
    list.pop_back();
  }
  auto it = class_by_hash_.find(rc.hash);
  if (it->second == c) {
    if (rc.next_same_hash == kNoSlot) {
      class_by_hash_.erase(it);
    } else {
      it->second = rc.next_same_hash;
    }
  } else {
    std::uint32_t p = it->second;
    while (route_class(p).next_same_hash != c) p = route_class(p).next_same_hash;
    route_class(p).next_same_hash = rc.next_same_hash;
  }
  rc.links.clear();
  rc.pos.clear();
  rc.members.clear();
  free_classes_.push_back(c);
}

double FluidNetwork::member_remaining(const RouteClass& rc, const Member& m) const {
  return std::max(0.0, m.key - class_sent(rc));
}

void FluidNetwork::account_class(std::uint32_t c) {
  RouteClass& rc = route_class(c);
  const double sent = class_sent(rc);
  const double advance = sent - rc.counted;
  if (advance != 0 && !rc.members.empty()) {
    const double bytes = advance * static_cast<double>(rc.members.size());
    for (LinkId l : rc.links) links_[l].bytes += bytes;
  }
  rc.counted = sent;
}

// ---- Rate groups ------------------------------------------------------------------------------

auto FluidNetwork::group_placer(RateGroup& g) {
  return [this, &g](std::size_t i, const GroupEntry& e) {
    g.classes[i] = e;
    route_class(e.route_class).group_pos = static_cast<std::uint32_t>(i);
  };
}

std::uint32_t FluidNetwork::new_group(LinkId link, double rate) {
  std::uint32_t g;
  if (!free_groups_.empty()) {
    g = free_groups_.back();
    free_groups_.pop_back();
  } else {
    g = static_cast<std::uint32_t>(groups_.size());
    groups_.emplace_back();
  }
  RateGroup& gr = groups_[g];
  gr.rate = rate;
  gr.clock = 0;
  gr.settled = engine_.now();
  gr.link = link;
  gr.classes.clear();
  gr.stamp = 0;
  gr.in_solve = 0;
  // The link's previous group keeps its classes and rate, and no longer takes new ones.
  if (const std::uint32_t old = group_of_link_[link]; old != kNoSlot) groups_[old].link = kNoSlot;
  group_of_link_[link] = g;
  return g;
}

void FluidNetwork::settle_group(std::uint32_t g) {
  RateGroup& gr = groups_[g];
  gr.clock = group_clock(gr);
  gr.settled = engine_.now();
  if (gr.clock > 1e12) {
    // Move the origin before the clock loses byte precision: every class's `sent` becomes 0.
    for (GroupEntry& e : gr.classes) {
      RouteClass& rc = route_class(e.route_class);
      const double sent = gr.clock - rc.offset;
      for (Member& m : rc.members) m.key -= sent;
      rc.counted -= sent;
      rc.offset = 0;
      e.end = rc.members[0].key;
    }
    gr.clock = 0;
    for (std::size_t i = gr.classes.size() / 2; i-- > 0;)
      heap::sift_down<2>(gr.classes, i, std::less<GroupEntry>(), group_placer(gr));
  }
}

void FluidNetwork::schedule_group(std::uint32_t g) {
  if (g == group_event_) return;  // on_group_event re-times it once, after its completions
  const RateGroup& gr = groups_[g];
  if (gr.classes.empty() || !(gr.rate > 0)) {
    class_timers_.erase(g);
    return;
  }
  const double remaining = std::max(0.0, gr.classes[0].end - gr.clock);
  const Time end =
      std::max(engine_.now(), gr.settled + Time::from_seconds_ceil(remaining / gr.rate));
  class_timers_.set(g, Wake{end.count_ns(), ++wake_seq_});
  arm_wakeup();
}

void FluidNetwork::set_group_rate(std::uint32_t g, double rate) {
  settle_group(g);
  groups_[g].rate = rate;
  schedule_group(g);
}

void FluidNetwork::enter_group(std::uint32_t c, std::uint32_t g) {
  RouteClass& rc = route_class(c);
  MLSIM_CHECK(rc.group == kNoSlot && !rc.members.empty(), "a class enters one group");
  RateGroup& gr = groups_[g];
  rc.offset = group_clock(gr) - rc.sent;
  rc.group = g;
  class_solve_[c].group = g;
  ++solve_stats_.group_entries;
  gr.classes.push_back(GroupEntry{rc.members[0].key + rc.offset, c});
  heap::sift_up<2>(gr.classes, gr.classes.size() - 1, std::less<GroupEntry>(), group_placer(gr));
  if (rc.group_pos == 0) schedule_group(g);
}

void FluidNetwork::leave_group(std::uint32_t c) {
  RouteClass& rc = route_class(c);
  const std::uint32_t g = rc.group;
  if (g == kNoSlot) return;
  RateGroup& gr = groups_[g];
  rc.sent = group_clock(gr) - rc.offset;
  const bool head = rc.group_pos == 0;
  heap::erase_at<2>(gr.classes, rc.group_pos, std::less<GroupEntry>(), group_placer(gr));
  rc.group = kNoSlot;
  class_solve_[c].group = kNoSlot;
  if (gr.classes.empty()) {
    class_timers_.erase(g);
    if (gr.link != kNoSlot && group_of_link_[gr.link] == g) group_of_link_[gr.link] = kNoSlot;
    gr.link = kNoSlot;
    free_groups_.push_back(g);
  } else if (head) {
    schedule_group(g);
  }
}

void FluidNetwork::group_head_changed(std::uint32_t c) {
  RouteClass& rc = route_class(c);
  if (rc.group == kNoSlot) return;
  RateGroup& gr = groups_[rc.group];
  const GroupEntry top = gr.classes[0];
  const std::size_t i = rc.group_pos;
  const GroupEntry e{rc.members[0].key + rc.offset, c};
  const bool smaller = e < gr.classes[i];
  gr.classes[i] = e;
  if (smaller) {
    heap::sift_up<2>(gr.classes, i, std::less<GroupEntry>(), group_placer(gr));
  } else {
    heap::sift_down<2>(gr.classes, i, std::less<GroupEntry>(), group_placer(gr));
  }
  if (gr.classes[0].route_class != top.route_class || gr.classes[0].end != top.end)
    schedule_group(rc.group);
}

bool FluidNetwork::relabel_alone(std::uint32_t g, LinkId link, double rate) {
  // A class alone in its group keeps the group (its clock and event) when it moves to a link
  // that has no group yet in this solve: the group follows it, as a class's own clock did
  // before rate groups (settled and re-timed once), instead of leaving a group that is then
  // freed and entering a new one (two heap moves and two re-timings). Where links freeze one or
  // two classes each (the benchmark's groups of 4 hosts), most moves are such.
  RateGroup& gr = groups_[g];
  if (gr.classes.size() != 1 || link_decided_[link] == stamp_) return false;
  const std::uint32_t there = group_of_link_[link];
  if (there != kNoSlot && there != g) return false;
  if (gr.link != link) {
    if (gr.link != kNoSlot && group_of_link_[gr.link] == g) group_of_link_[gr.link] = kNoSlot;
    gr.link = link;
    group_of_link_[link] = g;
  }
  link_decided_[link] = stamp_;
  link_target_[link] = g;
  set_group_rate(g, rate);
  ++solve_stats_.group_rate_changes;
  return true;
}

std::uint32_t FluidNetwork::target_group(LinkId link, double rate) {
  // Decided once per solve and link: the link's group if its rate stays (within rounding), or if
  // every class in it was solved again (then the group changes rate as a whole: one clock
  // settled, one event re-timed); else a new group (the old one keeps the classes this solve
  // did not touch, at their rate).
  if (link_decided_[link] == stamp_) {
    const std::uint32_t g = link_target_[link];
    if (g < groups_.size() && groups_[g].link == link && !groups_[g].classes.empty()) return g;
  }
  link_decided_[link] = stamp_;
  std::uint32_t g = group_of_link_[link];
  if (g != kNoSlot) {
    const RateGroup& gr = counted_group(g);
    if (std::fabs(rate - gr.rate) <= kRateTolerance * gr.rate) {
      link_target_[link] = g;
      return g;
    }
    if (gr.stamp == stamp_ && gr.in_solve == gr.classes.size()) {
      set_group_rate(g, rate);
      ++solve_stats_.group_rate_changes;
      link_target_[link] = g;
      return g;
    }
  }
  g = new_group(link, rate);
  link_target_[link] = g;
  return g;
}

// A route class's members form a binary min-heap on (key, flow); each flow knows its place.
auto FluidNetwork::member_placer(RouteClass& rc) {
  return [this, &rc](std::size_t i, const Member& m) {
    rc.members[i] = m;
    slot(m.flow).member_pos = static_cast<std::uint32_t>(i);
  };
}

void FluidNetwork::member_sift_up(RouteClass& rc, std::size_t i) {
  heap::sift_up<2>(rc.members, i, std::less<Member>(), member_placer(rc));
}

void FluidNetwork::member_erase(RouteClass& rc, std::size_t i) {
  heap::erase_at<2>(rc.members, i, std::less<Member>(), member_placer(rc));
}

void FluidNetwork::join_class(std::uint32_t f, double remaining) {
  Flow& fl = slot(f);
  const std::uint32_t c =
      find_or_add_class(std::span<const LinkId>(fl.links.begin(), fl.links.size()));
  account_class(c);  // the members so far sent their bytes without this one
  RouteClass& rc = route_class(c);
  fl.route_class = c;
  fl.lazy = false;
  fl.send_end = Time::max();
  rc.members.push_back(Member{class_sent(rc) + remaining, f});
  member_sift_up(rc, rc.members.size() - 1);
  note_class_change(c);
  ++class_solve_[c].weight;
  for (LinkId l : rc.links) ++links_[l].members;
  if (fl.member_pos == 0) group_head_changed(c);
}

double FluidNetwork::leave_class(std::uint32_t f) {
  Flow& fl = slot(f);
  const std::uint32_t c = fl.route_class;
  account_class(c);
  RouteClass& rc = route_class(c);
  const double remaining = member_remaining(rc, rc.members[fl.member_pos]);
  const bool head = fl.member_pos == 0;
  member_erase(rc, fl.member_pos);
  note_class_change(c);
  --class_solve_[c].weight;
  for (LinkId l : rc.links) --links_[l].members;
  fl.route_class = kNoSlot;
  fl.remaining = remaining;
  fl.settled = engine_.now();
  if (rc.members.empty()) {
    free_class(c);
  } else if (head) {
    group_head_changed(c);
  }
  return remaining;
}

void FluidNetwork::on_group_event(std::uint32_t g) {
  // The head class's head member has sent its last byte; so have the other members, of this
  // class and of the group's other classes, whose end rounds to now.
  settle_group(g);
  const double rate = groups_[g].rate;
  group_event_ = g;
  std::vector<std::uint32_t> done;
  done.swap(finishing_);
  done.clear();
  for (bool first = true; !groups_[g].classes.empty(); first = false) {
    const std::uint32_t c = groups_[g].classes[0].route_class;
    RouteClass& rc = route_class(c);
    if (!first &&
        Time::from_seconds_ceil(member_remaining(rc, rc.members[0]) / rate) != Time::zero())
      break;
    account_class(c);
    const double sent = rc.counted;
    do {
      const Member m = rc.members[0];
      // Its bytes, exactly: the class counted rate x time, which the rounding up of the end to
      // the nanosecond can overshoot by a hair.
      const double correction = m.key - sent;
      for (LinkId l : rc.links) links_[l].bytes += correction;
      member_erase(rc, 0);
      note_class_change(c);
      --class_solve_[c].weight;
      for (LinkId l : rc.links) --links_[l].members;
      slot(m.flow).route_class = kNoSlot;
      done.push_back(m.flow);
    } while (!rc.members.empty() &&
             Time::from_seconds_ceil(std::max(0.0, rc.members[0].key - sent) / rate) ==
                 Time::zero());
    if (rc.members.empty()) {
      free_class(c);  // frees the group with its last class
    } else {
      group_head_changed(c);
    }
  }
  group_event_ = kNoSlot;
  if (!groups_[g].classes.empty()) schedule_group(g);
  for (std::uint32_t f : done) {
    Flow& gl = slot(f);
    gl.remaining = 0;
    gl.settled = engine_.now();
    gl.send_end = engine_.now();
    gl.state = State::kArriving;
    rebalance(gl.links, rate);
    if (gl.latency == Time::zero()) {
      deliver(f);
    } else {
      schedule(f, engine_.now() + gl.latency);
    }
  }
  done.clear();
  finishing_.swap(done);
}

void FluidNetwork::set_link_bandwidth(LinkId link, Bandwidth bw) {
  MLSIM_CHECK(link < links_.size(), "link id out of range");
  if (!(bw.bytes_per_s > 0) || !std::isfinite(bw.bytes_per_s))
    throw InputError("network", "link bandwidth must be positive (fail the link instead)");
  links_[link].capacity = bw.bytes_per_s;
  drop_saved_fill();  // its levels were of the old capacity
  if (sharing_ == Sharing::kMaxMin) evict_finished(link);
  const LinkId seed[] = {link};
  rebalance(seed);
}

void FluidNetwork::set_link_latency(LinkId link, Time latency) {
  MLSIM_CHECK(link < links_.size(), "link id out of range");
  router_.set_link_latency(link, latency);
}

void FluidNetwork::set_link_up(LinkId link, bool up) {
  MLSIM_CHECK(link < links_.size(), "link id out of range");
  router_.set_link_up(link, up);
  if (up) return;
  drop_saved_fill();
  if (sharing_ == Sharing::kMaxMin) evict_finished(link);
  victims_.clear();
  for (const Entry& e : links_[link].flows)
    if (still_sending(slot(e.flow))) victims_.push_back(e.flow);
  for (const ClassEntry& e : links_[link].classes)
    for (const Member& m : route_class(e.route_class).members) victims_.push_back(m.flow);
  seeds_.clear();
  for (std::uint32_t g : victims_) {
    Flow& gl = slot(g);
    if (gl.route_class != kNoSlot) {
      leave_class(g);  // its bytes left are now its own; it is on no list
      gl.rate = 0;
      gl.send_end = Time::max();
    } else {
      settle(g);
      detach(g);
    }
    seeds_.insert(seeds_.end(), gl.links.begin(), gl.links.end());
    const auto route = router_.route(gl.src, gl.dst, gl.label);
    if (!route) {
      gl.links.clear();
      fail_later(g);
      continue;
    }
    // The bytes not yet sent start again from the source on the new route.
    gl.latency = route->latency;
    gl.rate = 0;
    gl.send_end = Time::max();
    cancel_timer(g);
    attach(g, route->links);
    seeds_.insert(seeds_.end(), gl.links.begin(), gl.links.end());
  }
  rebalance(seeds_);
}

// ---- Statistics --------------------------------------------------------------------------------

LinkStats FluidNetwork::link_stats(LinkId link) const {
  MLSIM_CHECK(link < links_.size(), "link id out of range");
  const LinkState& ls = links_[link];
  const Time now = engine_.now();
  double bytes = ls.bytes;
  for (const Entry& e : ls.flows) {  // bytes sent since the flow was last settled
    const Flow& g = slot(e.flow);
    bytes += now >= g.send_end ? g.remaining
                               : std::min(g.remaining, g.rate * (now - g.settled).seconds());
  }
  for (const ClassEntry& e : ls.classes) {  // and since each class was last settled
    const RouteClass& rc = route_class(e.route_class);
    bytes += (class_sent(rc) - rc.counted) * static_cast<double>(rc.members.size());
  }
  LinkStats s;
  s.bytes_carried = Bytes{std::llround(bytes)};
  const std::int64_t current = (std::min(now, ls.period_end) - ls.period_start).count_ns();
  s.busy_seconds =
      static_cast<double>(ls.busy_closed_ns + std::max<std::int64_t>(0, current)) * 1e-9;
  return s;
}

NetworkTotals FluidNetwork::totals() const {
  NetworkTotals t = totals_;
  for (std::uint32_t f = 0; f < slots_used_; ++f) {
    const Flow& fl = slot(f);
    if (fl.state == State::kFree) continue;
    ++t.transfers_in_flight;
    t.bytes_in_flight += fl.bytes;
  }
  return t;
}

double FluidNetwork::current_rate(TransferId id) const {
  const std::uint32_t f = find(id);
  if (f == kNoSlot) return 0;
  const Flow& fl = slot(f);
  if (fl.state == State::kSending && fl.route_class != kNoSlot)
    return class_rate(route_class(fl.route_class));
  return fl.state == State::kSending && still_sending(fl) ? fl.rate : 0;
}

std::span<const LinkId> FluidNetwork::current_route(TransferId id) const {
  const std::uint32_t f = find(id);
  if (f == kNoSlot) return {};
  return slot(f).links;
}

}  // namespace mlsim
