#pragma once
// The `analytic` and `flow` network backends: fluid models, where a transfer is a flow of bytes
// at some rate along its route, with no packets.
//
// Timing model (both backends). A transfer of B bytes on a route of links l1..lk with total
// latency L sends its bytes from the source at a rate r(t), then arrives L later:
//     sending ends at T, the first time the integral of r from the start reaches B,
//     delivery (the callback) at T + L.
// The links are occupied (and shared) only while the bytes are being sent; latency is paid once
// per transfer, after sending, as on a cut-through path. For a lone transfer this is the usual
// latency + bytes / bottleneck bandwidth. Sending ends are rounded up to the nanosecond.
//   - analytic: r is the bottleneck bandwidth of the route, whatever else crosses the links
//     (no sharing). Closed form, one event per transfer.
//   - flow: r is the max-min fair share among the transfers sending at the same time
//     (max_min.hpp), recomputed incrementally: when a transfer starts or stops sending, or a link
//     changes, only the connected component of transfers sharing links with the change is solved
//     again. All the changes of one instant are solved together, once, by an event at that
//     instant (rates only matter over elapsed time): N transfers started at once cost one solve,
//     not N (start_transfers starts a whole phase in one call).
//
// Route classes (flow mode). Transfers that share a link are grouped by route: the transfers of
// one route always have the same max-min rate, so the solver sees one weighted flow per route
// (its cost is the number of distinct routes in the component, not of transfers), and the class
// advances all its members together, as a processor-sharing queue: it keeps `sent`, the bytes
// each member has sent since the class's origin, and each member the value of `sent` at which
// its last byte leaves (its key); a completion touches only the member that completes.
// Rate groups: the classes one solve froze at the same link (so at the same rate) share a clock,
// the bytes each of their members sent since the group's origin, and each class's `sent` is that
// clock less an offset. A group whose classes were all solved again changes rate in place (one
// clock settled, one event re-timed), touching no class; a class whose bottleneck changed moves
// to its new link's group. Each group holds one pending event, for the earliest member end of
// its classes.
//
// Cost. A transfer alone on its links (the common case in collectives) costs O(route length) to
// start and one engine event, in both backends: it leaves its links lazily (when the next
// transfer arrives on them, or at delivery), so no event marks the end of sending. Transfers
// that share a link get an extra event at the end of sending. Storage for transfers and classes
// is pooled: no allocation per transfer once the pool is warm; memory is linear in the transfers
// in flight.
//
// Events. The backend keeps its own pending events and holds ONE engine event, for the earliest
// of them: times that arrive in order (equal latencies and sizes) go to a FIFO, others to an
// indexed min-heap keyed by transfer slot; each rate group has one entry in a heap of group
// events. A re-solve updates one heap key per group whose rate changed; it leaves nothing behind
// in the engine. Among themselves, the backend's events run in (time, scheduling order), as they
// would as separate engine events.
//
// Links failing: transfers still sending over a failed link are rerouted from their source with
// the bytes not yet sent (bytes already sent are kept) when another path exists, and delivered
// after the new route's latency; otherwise they fail (callback with failed = true). Transfers
// whose bytes were all sent are past the link and are delivered. A link coming back up is used by
// transfers started afterwards; running transfers keep their route.
//
// Callbacks never run inside a Network call: deliveries and failures (including a failure at
// start for want of a route, and cancellation) are engine events at the current time or later.
//
// Link statistics: bytes_carried counts bytes sent over the link so far (up to now);
// busy_seconds is the time during which at least one transfer was sending over the link.
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "sim_core/base/indexed_heap.hpp"
#include "sim_core/base/small_vector.hpp"
#include "sim_core/network/max_min.hpp"
#include "sim_core/network/network.hpp"
#include "sim_core/network/routing.hpp"

namespace mlsim {

enum class Sharing {
  kNone,    // analytic
  kMaxMin,  // flow
};

class FluidNetwork final : public Network {
 public:
  // `engine` and `topology` must outlive the network. `route_classes` (flow mode): group sharing
  // transfers by route and re-solve only the rates that can change (see the top of this file);
  // off, every sharing transfer is settled and rescheduled on its own and every component is
  // solved whole, as the backend did before route classes (the scenarios' default, so their
  // results stay what they were).
  FluidNetwork(Engine& engine, const Topology& topology, Sharing sharing,
               bool route_classes = false);
  ~FluidNetwork() override;
  FluidNetwork(const FluidNetwork&) = delete;
  FluidNetwork& operator=(const FluidNetwork&) = delete;

  std::string_view backend_name() const override;
  TransferId start_transfer(NodeId src, NodeId dst, Bytes bytes, DeliveryCallback done,
                            std::uint64_t flow_label = 0) override;
  void start_transfers(std::span<TransferRequest> phase) override;
  bool cancel_transfer(TransferId id) override;
  void set_link_bandwidth(LinkId link, Bandwidth bw) override;
  void set_link_latency(LinkId link, Time latency) override;
  void set_link_up(LinkId link, bool up) override;
  LinkStats link_stats(LinkId link) const override;
  NetworkTotals totals() const override;

  // Current sending rate of a transfer in bytes/s; 0 once its bytes are sent or when unknown.
  double current_rate(TransferId id) const;
  // Links of a transfer's current route (empty once delivered or unknown).
  std::span<const LinkId> current_route(TransferId id) const;
  Router& router() { return router_; }
  // Flow mode: max-min solves run, how many of them re-solved only the rates that could change
  // (above a floor), and the route classes and transfers they solved in all. Route classes: the
  // rate groups re-rated in place (one clock and one event for all their classes) and the classes
  // that entered a group (one heap move each: new classes, and ones whose bottleneck changed).
  struct SolveStats {
    std::uint64_t solves = 0, partial = 0, solved = 0;
    std::uint64_t group_rate_changes = 0, group_entries = 0;
    std::uint64_t restarted = 0;  // solves that restarted the last filling (fill_restart_)
    // Restarted solves whose rate groups were counted at the freeze (count_at_freeze_), and of
    // those the ones that met a lone class (then counted again class by class).
    std::uint64_t counted_at_freeze = 0, lone_recounts = 0;
    // In-place fillings (route classes) that froze everything they solved at one link, in one
    // step: the case of the single-bottleneck fast path (docs/plans/flow_fast_path.md), counted
    // to see where it would run. A partial solve counts if its part took one step.
    std::uint64_t one_step = 0;
  };
  const SolveStats& solve_stats() const { return solve_stats_; }
  // Route classes: components of at most this many links are filled by a scan, larger ones with
  // a heap (both give the same allocation; tests force one or the other: 0 is always the heap).
  void set_scan_fill_max(std::size_t links) { scan_fill_max_ = links; }
  // Route classes: a solve may restart the last solve's filling from the first link it changes
  // instead of gathering the component again (on by default; tests compare both).
  void set_fill_restart(bool on) {
    fill_restart_ = on;
    fill_saved_ = false;
  }
  // Route classes: a restarted solve counts the classes of each rate group as its filling freezes
  // them, instead of in a pass after it (on by default; tests compare both: the same counts).
  void set_count_at_freeze(bool on) { freeze_counts_ = on; }

 private:
  enum class State : std::uint8_t { kFree, kSending, kArriving, kFailing };
  // Fields used on every transfer come first, to touch few cache lines.
  struct Flow {
    std::uint32_t generation = 1;
    std::uint32_t ticket = 0;  // matches the flow's delivery-queue entry while it is current
    State state = State::kFree;
    // Sending alone on all its links: its event is the delivery, and it leaves its links lazily.
    bool lazy = false;
    bool queued = false;  // its pending event is in the delivery queue
    std::uint32_t stamp = 0;
    double remaining = 0;  // bytes not yet sent, as of `settled`
    double rate = 0;       // bytes/s
    Time settled, send_end, latency;
    // The route, and for each link the index of this flow's entry in the link's flow list.
    // Routes of up to 6 links (a fat-tree's longest) are stored in the slot itself.
    SmallVector<LinkId, 6> links;
    SmallVector<std::uint32_t, 6> pos;
    std::uint32_t route_class = ~0u;  // flow mode, sharing: its class (then not in links' lists)
    std::uint32_t member_pos = 0;     // its place in the class's member heap
    double new_rate = 0;              // route classes: its rate in the solve under way (< 0: unset)
    LinkId new_bottleneck = 0;        // and the link that froze it
    DeliveryCallback done;
    NodeId src = 0, dst = 0;
    std::uint64_t label = 0;
    Bytes bytes;
    Time started;
  };
  struct Entry {
    std::uint32_t flow;
    std::uint32_t hop;
  };
  struct ClassEntry {
    std::uint32_t route_class;
    std::uint32_t hop;
  };
  struct LinkState {
    double capacity = 0;          // bytes/s
    SmallVector<Entry, 2> flows;  // transfers not in a route class (lazy ones, or just rerouted)
    SmallVector<ClassEntry, 2> classes;
    std::uint32_t members = 0;  // members of those classes
    double bytes = 0;           // settled bytes carried
    // Busy time: closed periods plus the current one [period_start, period_end), where
    // period_end is the latest projected end of sending of the flows on the link.
    std::int64_t busy_closed_ns = 0;
    Time period_start, period_end;
    std::uint32_t stamp = 0;
  };

  // Flow mode: the transfers sharing links, grouped by route (see the top of this file).
  struct Member {
    double key;  // the class's `sent` when this member's last byte leaves
    std::uint32_t flow;
    bool operator<(const Member& o) const { return key < o.key || (key == o.key && flow < o.flow); }
  };
  struct RouteClass {
    SmallVector<LinkId, 6> links;
    SmallVector<std::uint32_t, 6> pos;  // its entry in each link's class list
    SmallVector<Member, 1> members;     // min-heap on (key, flow)
    // Bytes each member sent since the class's origin: `sent` while the class is in no rate group
    // (it has no rate yet), else its group's clock less `offset` (class_sent).
    double sent = 0;
    double offset = 0;
    double counted = 0;           // the value of sent up to which its bytes were added to its links
    std::uint32_t group = ~0u;    // its rate group, or ~0u
    std::uint32_t group_pos = 0;  // its entry in the group's heap
    std::uint64_t hash = 0;
    std::uint32_t next_same_hash = ~0u;
  };
  // A rate group: route classes that the last solve froze at the same link (their bottleneck),
  // so all at the same rate. Its clock is the bytes each member of its classes sent since the
  // group's origin, as a processor-sharing queue's virtual time: a rate change settles the clock
  // and re-times the group's one event (its earliest member end), not each class. Its classes
  // form a min-heap on the clock value at which their head member ends.
  struct GroupEntry {
    double end;  // group clock value at which the class's head member has sent its last byte
    std::uint32_t route_class;
    bool operator<(const GroupEntry& o) const {
      return end < o.end || (end == o.end && route_class < o.route_class);
    }
  };
  struct RateGroup {
    double rate = 0;   // bytes/s of each member of each of its classes
    double clock = 0;  // as of `settled`
    Time settled;
    LinkId link = ~0u;  // the bottleneck it stands for (group_of_link_), or ~0u once replaced
    std::vector<GroupEntry> classes;
    std::uint32_t stamp = 0, in_solve = 0;  // its classes re-solved by the solve of `stamp`
  };
  // A route class's state in the solve under way, apart from the class: the solve's walks visit
  // each class once per link of its route and mostly read only this, which for 640 classes fits
  // in 10 KiB instead of 100 KiB of class records (a star of 1 k flows: those reads were a third
  // of the walks' time).
  // Its group and member count are kept here too (copies of RouteClass::group and
  // members.size(), updated where those change), so that the walks decide whether a class is
  // kept at its rate without reading the class record (star 1 k: that read was the gathering
  // walk's largest cost).
  struct ClassSolve {
    std::uint32_t stamp = 0;    // the solve that last took it in (+ 1 once it froze it: stamp_)
    std::uint32_t weight = 0;   // its members
    double new_rate = 0;        // its rate in that solve (< 0: not yet frozen)
    LinkId bottleneck = 0;      // the link that froze it in that solve
    std::uint32_t group = ~0u;  // its rate group, or ~0u
    std::uint32_t hops = 0;     // its route's length (the route is in class_route_ up to 6)
    // Its place in `frozen_order_` when that holds it (the saved filling froze it), kFresh for a
    // class made since the saved filling on its links, else anything (checked against the list).
    std::uint32_t order_pos = ~0u;
  };
  // A class's route for the solve's walks: a copy in the flat `class_route_` (kRouteStride
  // slots per class) for routes of up to kRouteStride links, else the class record's. Reading
  // the class record's SmallVector was about a third of the gathering walk (star 1 k).
  static constexpr std::uint32_t kRouteStride = 6;
  std::span<const LinkId> solve_route(std::uint32_t c, const ClassSolve& cs) const {
    if (cs.hops <= kRouteStride)
      return {class_route_.data() + std::size_t{c} * kRouteStride, cs.hops};
    const RouteClass& rc = route_class(c);
    return {rc.links.begin(), rc.links.size()};
  }

  std::uint32_t allocate();
  void release_slot(std::uint32_t f);
  TransferId id_of(std::uint32_t f) const { return (std::uint64_t{slot(f).generation} << 32) | f; }
  // The slot of a transfer not yet reported, or ~0u.
  std::uint32_t find(TransferId id) const;

  // The flow's event at t (it has none pending).
  void schedule(std::uint32_t f, Time t);
  // Cancels the flow's event, if any, and schedules it at t.
  void reschedule(std::uint32_t f, Time t);
  void cancel_timer(std::uint32_t f);
  bool fifo_accepts(Time t) const { return queue_.empty() || t.count_ns() >= queue_.back_time(); }
  bool has_timer(std::uint32_t f) const { return slot(f).queued || timers_.contains(f); }
  void arm_queue();
  void run_queue();
  // Keeps the engine event at or before the earliest pending backend event.
  void arm_wakeup();
  // The engine event: runs the backend's events due now, in (time, scheduling order).
  void wake_up();
  void on_event(std::uint32_t f);
  void deliver(std::uint32_t f);
  void fail_later(std::uint32_t f);
  void report(std::uint32_t f, bool failed);

  // Puts a flow on the links of `route` (the links' flow lists); returns true if every one of
  // them was free.
  bool attach(std::uint32_t f, std::span<const LinkId> route);
  void detach(std::uint32_t f);
  // True if no transfer is on any of the links (flow mode: finished lazy ones leave first).
  bool route_free(std::span<const LinkId> route);

  // Route classes.
  RouteClass& route_class(std::uint32_t c) {
    return class_chunks_[c >> kChunkBits][c & kChunkMask];
  }
  const RouteClass& route_class(std::uint32_t c) const {
    return class_chunks_[c >> kChunkBits][c & kChunkMask];
  }
  std::uint32_t find_or_add_class(std::span<const LinkId> route);
  void free_class(std::uint32_t c);
  // Makes a sending flow (on no link list) a member of its route's class, with `remaining` bytes.
  void join_class(std::uint32_t f, double remaining);
  // Takes a member out of its class; returns the bytes it had left (the class is settled).
  double leave_class(std::uint32_t f);
  // Adds the bytes the class's members sent since last counted to its links.
  void account_class(std::uint32_t c);
  // Inline: called at every join, leave, completion and re-rate (the groups case: about 12 per
  // completion), where a call cost as much as the arithmetic.
  double class_sent(const RouteClass& rc) const {
    return rc.group == ~0u ? rc.sent : group_clock(groups_[rc.group]) - rc.offset;
  }
  double class_rate(const RouteClass& rc) const {
    return rc.group == ~0u ? 0.0 : groups_[rc.group].rate;
  }
  double member_remaining(const RouteClass& rc, const Member& m) const;
  // Rate groups (see RateGroup).
  double group_clock(const RateGroup& g) const {
    const Time now = engine_.now();
    if (now <= g.settled) return g.clock;
    return g.clock + g.rate * (now - g.settled).seconds();
  }
  std::uint32_t new_group(LinkId link, double rate);
  void settle_group(std::uint32_t g);
  void schedule_group(std::uint32_t g);
  void set_group_rate(std::uint32_t g, double rate);
  // Puts a class (in no group) into group g, keeping the bytes its members sent.
  void enter_group(std::uint32_t c, std::uint32_t g);
  // Takes a class out of its group (its `sent` is kept); frees the group once empty.
  void leave_group(std::uint32_t c);
  // The class's head member changed: its entry in its group's heap, and the group's event.
  void group_head_changed(std::uint32_t c);
  // The group for the classes and transfers that the solve under way froze at `link` at `rate`.
  std::uint32_t target_group(LinkId link, double rate);
  // Group g with its count of classes in the solve under way (in_solve, valid when its stamp is
  // the solve's). A partial solve counts them in apply_class_rates' first pass; in a full solve
  // every class of a group that touches the component is in it (they all cross its link), so the
  // count starts at the group's size when first asked, and the first pass skips the groups (the
  // benchmark's groups case: a full solve of four classes at each start and end).
  RateGroup& counted_group(std::uint32_t g) {
    RateGroup& gr = groups_[g];
    if (solve_full_ && gr.stamp != stamp_) {
      gr.stamp = stamp_;
      gr.in_solve = static_cast<std::uint32_t>(gr.classes.size());
    }
    return gr;
  }
  bool solve_full_ = false;  // the solve under way re-solves its whole component
  // A class alone in group g, frozen now at `link` at `rate`: g moves to the link and takes the
  // rate if the link has no other group (returns true), as the class's own clock would.
  bool relabel_alone(std::uint32_t g, LinkId link, double rate);
  void on_group_event(std::uint32_t g);
  auto group_placer(RateGroup& g);
  auto member_placer(RouteClass& rc);
  void member_sift_up(RouteClass& rc, std::size_t i);
  void member_erase(RouteClass& rc, std::size_t i);
  // Brings `remaining` up to date at now and counts the bytes sent on the flow's links.
  void settle(std::uint32_t f);
  // Flow mode: a lazy flow whose bytes are all sent leaves the link before another joins it.
  void evict_finished(LinkId l);
  bool still_sending(const Flow& fl) const { return fl.send_end > engine_.now() || !fl.lazy; }
  double bottleneck(const Flow& fl) const;
  // Gives a flow a new rate from now on and (re)schedules its event.
  void set_rate(std::uint32_t f, double rate, bool lazy);
  void start_period(LinkId l, Time send_end);
  void refresh_period(LinkId l);
  // Re-solves the flows connected to `seeds` (flow mode: once per instant, by an event at now)
  // or re-rates the flows on them (analytic), then refreshes the links' busy periods.
  // `floor`: the rate of a transfer that stopped sending (or kArrival for one that started; 0
  // for any other change): rates below the lowest floor of the instant cannot change.
  static constexpr double kArrival = -1;
  void rebalance(std::span<const LinkId> seeds, double floor = 0);
  double arrival_floor(std::span<const LinkId> seeds);
  // Below this many classes and transfers on the changed links, the whole component is solved.
  static constexpr std::size_t kPartialSolveMin = 32;
  // Starts a depth-first walk of the component of `seeds`: a new stamp, empty component lists,
  // and the seeds on `stack_`; `visit_link` pushes a link not yet stamped.
  void begin_component(std::span<const LinkId> seeds);
  void visit_link(LinkId l) {
    if (links_[l].stamp == stamp_) return;
    links_[l].stamp = stamp_;
    stack_.push_back(l);
  }
  void solve_component(std::span<const LinkId> seeds, double floor);
  // Route classes: the same solve, by progressive filling on the backend's own link and class
  // lists (no problem copied into a MaxMinSolver): gathering the component computes each link's
  // capacity left and unfrozen count, then `fill_in_place` freezes classes and transfers.
  void solve_in_place(std::span<const LinkId> seeds, double floor);
  void fill_in_place();
  // fill_in_place's freezing of link l's unfrozen transfers and classes at `share`, and its
  // filling by a scan instead of a heap for components of at most kScanFillMax links.
  template <bool kTouch, bool kLog, bool kCount>
  void freeze_at(LinkId l, double share);
  void reserve_log();
  template <bool kLog, bool kCount>
  void fill_by_scan();
  // 96: the benchmark's star (64 links) is scanned, fabrics of hundreds of links use the heap.
  static constexpr std::size_t kScanFillMax = 96;
  std::size_t scan_fill_max_ = kScanFillMax;
  // Restarting the filling (fill_restart_). A filling freezes links in order of level; a change
  // whose floor is x changes nothing frozen below x, so a solve can start from the state the last
  // filling had when it reached x: each link's capacity left then (restored from `undo_`, the
  // value each freeze overwrote) and its unfrozen count (the weights of the classes frozen from
  // that step on, and of the classes made since). That replaces the walk that gathers the
  // component. Kept only for a component of route classes alone (no transfer on its links' own
  // lists) and dropped at any other change on its links (attach, bandwidth, link down).
  struct FillStep {
    double level;
    std::uint32_t undo_begin, order_begin;
  };
  struct FillUndo {
    double left;
    LinkId link;
  };
  static constexpr std::uint32_t kFresh = ~1u;
  bool fill_restart_ = true;
  bool fill_saved_ = false;  // steps_, undo_ and frozen_order_ describe the saved links' filling
  bool logging_ = false;     // the filling under way records them
  double saved_base_ = 0;    // the filling kept every class below this rate (its first solve's)
  std::uint32_t saved_gen_ = 0;
  std::uint32_t pending_order_cut_ = ~0u;  // least place in frozen_order_ of a class changed
  // undo_ and frozen_order_ hold undo_top_ and order_top_ entries (they only grow: the filling
  // writes through pointers into room made by reserve_log or restart_fill).
  std::uint32_t undo_top_ = 0, order_top_ = 0;
  std::vector<FillStep> steps_;
  std::vector<FillUndo> undo_;
  std::vector<std::uint32_t> frozen_order_, new_classes_, link_saved_;
  std::vector<LinkId> saved_links_;
  bool link_in_saved(LinkId l) const { return fill_saved_ && link_saved_[l] == saved_gen_; }
  bool route_touches_saved(std::span<const LinkId> route) const;
  // A class gained or lost members: the saved filling must restart at or before its place.
  // Inline: called at every join and leave (the groups case has no saved filling).
  void note_class_change(std::uint32_t c) {
    if (fill_saved_) note_saved_class_change(c);
  }
  void note_saved_class_change(std::uint32_t c);
  void drop_saved_fill() { fill_saved_ = false; }
  // The restarted solve: true if it ran (the saved filling applies to these seeds and floor).
  bool restart_fill(std::span<const LinkId> seeds, double floor, double keep_below);
  // Gives the solved classes and transfers their new rates and events (apply_class_rates), then
  // refreshes the links' busy periods.
  void apply_rates();
  void apply_class_rates();
  // A class of one member whose links carry nothing else: apply_class_rates makes it a lone
  // transfer again.
  bool lone_class(std::uint32_t c, const ClassSolve& cs) const {
    if (cs.weight != 1) return false;
    for (LinkId m : solve_route(c, cs))
      if (links_[m].classes.size() != 1 || !links_[m].flows.empty()) return false;
    return true;
  }
  void count_in_group(std::uint32_t g, std::uint32_t n) {
    RateGroup& gr = groups_[g];
    if (gr.stamp != stamp_) {
      gr.stamp = stamp_;
      gr.in_solve = 0;
    }
    gr.in_solve += n;
  }
  // Counting at the freeze (restart_fill's solves): apply_class_rates' first pass counts each
  // class of the solve in its rate group, a walk over the about 480 classes of a star 1 k solve
  // (about 12% of its instructions). The filling knows them by link instead: the classes a step
  // freezes at link l are mostly in l's group, so freeze_at counts those in a register and adds
  // the count once per step, and counts the others (in another group) one by one. The counts
  // are the first pass's (it counts every class of the solve that is not lone, and a lone class
  // can only freeze at a link of one class: such a step sets lone_seen_, and the first pass then
  // runs as before, on counts reset).
  bool freeze_counts_ = true;       // set_count_at_freeze
  bool count_at_freeze_ = false;    // the filling under way counts
  bool counted_at_freeze_ = false;  // the solve under way was counted by freeze_at
  // apply_class_rates: true if the first pass must run anyway (a lone class; the counts reset),
  // and the check after it that no group was counted beyond its classes.
  bool take_freeze_counts();
  void check_recount() const;
  bool lone_seen_ = false;
  // Route classes: a transfer that shares a link joins its route's class only where a link of
  // its route carries at least this many transfers. Below it, a class per route (mostly of one
  // member) costs more than it saves (the benchmark's groups of 4 hosts: 1.37 M completions per
  // CPU second with classes against 1.6 M without, docs/performance.md), and the transfer keeps
  // its own rate and event as without route classes.
  static constexpr std::uint32_t kClassMinLoad = 8;
  bool crowded(std::span<const LinkId> route) const;

  // Flows live in fixed-size chunks, so a reference to one stays valid while others are added
  // (a delivery callback runs in place and may start new transfers).
  static constexpr std::uint32_t kChunkBits = 10;
  static constexpr std::uint32_t kChunkMask = (1u << kChunkBits) - 1;
  Flow& slot(std::uint32_t f) { return chunks_[f >> kChunkBits][f & ((1u << kChunkBits) - 1)]; }
  const Flow& slot(std::uint32_t f) const {
    return chunks_[f >> kChunkBits][f & ((1u << kChunkBits) - 1)];
  }

  Engine& engine_;
  const Topology& topology_;
  Router router_;
  const Sharing sharing_;
  const bool route_classes_;
  std::vector<std::unique_ptr<Flow[]>> chunks_;
  std::uint32_t slots_used_ = 0;
  std::vector<std::uint32_t> free_;
  std::vector<std::unique_ptr<RouteClass[]>> class_chunks_;
  std::uint32_t classes_used_ = 0;
  std::vector<std::uint32_t> free_classes_;
  // First class of a route hash (open addressing: no allocation per class once warm).
  absl::flat_hash_map<std::uint64_t, std::uint32_t> class_by_hash_;
  std::vector<LinkState> links_;
  // Stamps of walks and solves, always even: a route class taken into the solve of stamp s has
  // ClassSolve::stamp s until freeze_at freezes it, then s + 1, so the filling tells an unfrozen
  // class of its solve by one compare (star 1 k: about 1,100 class entries read per solve).
  std::uint32_t stamp_ = 0;
  void next_stamp() { stamp_ += 2; }
  NetworkTotals totals_;

  // The order of the backend's pending events: time, then a sequence number given when scheduled
  // (the FIFO's head counts as scheduled when it became the head).
  struct Wake {
    std::int64_t time;
    std::uint64_t seq;
    bool operator<(const Wake& o) const { return time < o.time || (time == o.time && seq < o.seq); }
  };
  // Flow events whose times were scheduled in non-decreasing order: a FIFO, which costs O(1) per
  // event. Other times go to `timers_`.
  struct Timer {
    std::int64_t time;
    std::uint32_t flow, ticket;
  };
  class TimerQueue {
   public:
    bool empty() const { return head_ == items_.size(); }
    const Timer& front() const { return items_[head_]; }
    std::int64_t back_time() const { return items_.back().time; }
    void push(const Timer& t) { items_.push_back(t); }
    void pop() {
      if (++head_ == items_.size()) {
        items_.clear();
        head_ = 0;
      } else if (head_ >= 4096 && 2 * head_ >= items_.size()) {
        items_.erase(items_.begin(), items_.begin() + static_cast<std::ptrdiff_t>(head_));
        head_ = 0;
      }
    }

   private:
    std::vector<Timer> items_;
    std::size_t head_ = 0;
  };
  TimerQueue queue_;
  bool queue_armed_ = false;  // queue_wake_ holds the FIFO head's place in the order
  Wake queue_wake_{};
  IndexedHeap<Wake> timers_;        // by flow slot
  IndexedHeap<Wake> class_timers_;  // by rate group
  std::vector<RateGroup> groups_;
  std::vector<std::uint32_t> free_groups_;
  std::vector<std::uint32_t> group_of_link_;  // by LinkId: the group of its bottleneck classes
  std::vector<std::uint32_t> link_decided_;   // by LinkId: the solve stamp of its target_group
  std::vector<std::uint32_t> link_target_;
  std::uint32_t group_event_ = ~0u;  // the group whose event on_group_event is running
  std::uint64_t wake_seq_ = 0;
  EventHandle wake_event_;
  Time wake_time_;
  bool waking_ = false;  // inside wake_up(): it re-arms once done
  // Flow mode: links touched by changes at this instant, solved by one pending event at now.
  bool solve_armed_ = false;
  Wake solve_wake_{};
  std::vector<LinkId> pending_seeds_, solving_seeds_;
  double pending_floor_ = std::numeric_limits<double>::infinity();
  SolveStats solve_stats_;
  bool pending_arrival_ = false;

  // Scratch, reused.
  // Progressive filling in place, per link (indexed by LinkId): capacity not yet given to frozen
  // transfers, unfrozen transfers crossing it, its heap key (its share when last computed; a
  // lower bound while `stale`), its place in `fill_heap_`, the freeze round that last touched it.
  struct FillLink {
    double left = 0, key = 0;
    std::uint32_t unfrozen = 0, place = 0, round = 0;
    bool stale = false;
  };
  std::vector<FillLink> fill_;
  // fill_by_scan: each scanned link's share, by its place in the scan (FillLink::place).
  std::vector<double> scan_key_;
  // A link's share for the scan: +infinity once nothing on it is left unfrozen, so the scan needs
  // no count test (and 0 / 0 never reaches it).
  static double scan_share(const FillLink& f) {
    const double share = f.left / f.unfrozen;
    return f.unfrozen != 0 ? share : std::numeric_limits<double>::infinity();
  }
  struct FillItem {
    double key;  // the link's FillLink::key
    LinkId link;
  };
  static constexpr std::size_t kFillArity = 2;
  std::vector<FillItem> fill_heap_;
  std::vector<ClassSolve> class_solve_;  // by route class, sized as classes are made
  std::vector<LinkId> class_route_;      // kRouteStride slots per route class (solve_route)
  std::vector<LinkId> touched_, scan_links_;
  std::uint32_t fill_round_ = 0;
  struct Rated {
    double rate, weight;
  };
  std::vector<Rated> rated_;
  MaxMinSolver solver_;
  std::vector<LinkId> stack_, component_links_, seeds_;
  std::vector<std::uint32_t> component_flows_, component_classes_, local_links_, local_index_,
      victims_, finishing_;
};

}  // namespace mlsim
