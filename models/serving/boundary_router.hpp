#pragma once
// The routers of an elastic deployment's stage boundaries (elastic.hpp, issue 16): which live
// worker of a stage a virtual engine's micro-batches go to. An engine is bound to one worker per
// stage while its requests keep KV there, so a router decides when an engine holds no KV (it is
// about to take a request, bind_idle_engine), when its worker failed or is draining, and when a
// join rebalances. Three registered policies (policies.cpp, `elastic.stage_router`):
//  - round_robin (the default): the next live worker in turn, as pymultiworld's serving example
//    does (examples/resnet/m8d.py, run_leader: the leader sends each request to the next world,
//    `worker_idx += 1`, wrapping, and tries the next one when a send to a broken world raises).
//    The paper's own router is not in the text we could read; this is the public code's.
//  - fewest_engines: the live worker with the fewest engines bound, the first among equals: it
//    balances assignments, not load.
//  - least_work: join-the-shortest-queue by work: the live worker whose bound engines have the
//    fewest prefill and output tokens still to process (ReplicaState::outstanding_tokens), then
//    the fewest engines, then the first. A worker that drains its engines' work faster (or whose
//    engines hold shorter requests) takes the next engine.
//
// Each stage keeps its live workers in an ordered set (round_robin) and an indexed min-heap
// (sim_core/base/indexed_heap.hpp) keyed by the policy's key, the worker's index last
// (determinism). Every change of an engine's work or binding updates its worker's two counters in
// O(1) and marks the worker; marked workers are re-keyed, O(log n) each, when a stage's choice is
// next asked for, so a decision costs O(log n) plus O(log n) per worker whose load changed since
// the previous one.
#include <cstdint>
#include <set>
#include <utility>
#include <vector>

#include "sim_core/base/error.hpp"
#include "sim_core/base/indexed_heap.hpp"

namespace mlsim::serving {

enum class StageRouting : std::uint8_t { kRoundRobin, kFewestEngines, kLeastWork };

// Where a join's rebalancing (elastic.cpp, ElasticDeployment::rebalance) moves engines holding KV
// (`elastic.rebalance`, a registered policy): until every live worker has about as many engines
// (fewest_engines), or only while a move narrows the gap in work between the most and the least
// loaded worker (least_work). Engines holding no KV even out by counts under both.
enum class Rebalancing : std::uint8_t { kFewestEngines, kLeastWork };

class BoundaryRouters {
 public:
  // `workers[s]`: workers placed at stage s (stage 0, the front, has no router; give it 0).
  BoundaryRouters(StageRouting policy, const std::vector<int>& workers) : policy_(policy) {
    stages_.resize(workers.size());
    for (std::size_t s = 0; s < workers.size(); ++s) {
      stages_[s].engines.assign(static_cast<std::size_t>(workers[s]), 0);
      stages_[s].work.assign(static_cast<std::size_t>(workers[s]), 0);
      stages_[s].live.assign(static_cast<std::size_t>(workers[s]), 0);
      stages_[s].marked.assign(static_cast<std::size_t>(workers[s]), 0);
    }
  }

  StageRouting policy() const { return policy_; }

  // Worker `index` of `stage` takes engines (live) or not (spare, loading, draining, failed).
  void set_live(int stage, int index, bool live) {
    Stage& st = at(stage);
    const auto i = static_cast<std::size_t>(index);
    if ((st.live[i] != 0) == live) return;
    st.live[i] = live ? 1 : 0;
    if (live) {
      st.heap.set(static_cast<std::uint32_t>(index), key(st, i));
      st.in_turn.insert(index);
    } else {
      st.heap.erase(static_cast<std::uint32_t>(index));
      st.in_turn.erase(index);
    }
  }

  // An engine holding `work` tokens moved from worker `from` to worker `to` of `stage` (-1: none).
  void engine_moved(int stage, int from, int to, std::int64_t work) {
    Stage& st = at(stage);
    if (from >= 0) {
      st.engines[static_cast<std::size_t>(from)] -= 1;
      st.work[static_cast<std::size_t>(from)] -= work;
      mark(st, from);
    }
    if (to >= 0) {
      st.engines[static_cast<std::size_t>(to)] += 1;
      st.work[static_cast<std::size_t>(to)] += work;
      mark(st, to);
    }
  }

  // The work of an engine bound to worker `index` of `stage` changed by `delta` tokens. O(1).
  void work_changed(int stage, int index, std::int64_t delta) {
    Stage& st = at(stage);
    st.work[static_cast<std::size_t>(index)] += delta;
    if (policy_ == StageRouting::kLeastWork) mark(st, index);
  }

  // The live worker of `stage` the policy sends an engine to; -1 when none is live. With
  // `current` (the engine's live worker now), the engine's own binding is not counted, and it
  // stays where it is unless another worker is strictly better (no move for nothing).
  int pick(int stage, int current = -1) {
    Stage& st = at(stage);
    if (policy_ == StageRouting::kRoundRobin) {
      if (st.in_turn.empty()) return -1;
      auto next = st.in_turn.upper_bound(st.last);
      if (next == st.in_turn.end()) next = st.in_turn.begin();
      st.last = *next;
      return st.last;
    }
    refresh(st);
    if (st.heap.empty()) return -1;
    if (current < 0 || st.live[static_cast<std::size_t>(current)] == 0)
      return static_cast<int>(st.heap.top_id());
    const auto c = static_cast<std::size_t>(current);
    // Without the engine itself (an idle engine has no work to take away).
    const Key own = key(st, c, /*less_one=*/1);
    const auto id = static_cast<std::uint32_t>(current);
    st.heap.update(id, own);
    const auto best = st.heap.top_id();
    const bool stay = best == id || !(primary(st.heap.top_key()) < primary(own));
    st.heap.update(id, key(st, c));
    return stay ? current : static_cast<int>(best);
  }

  // The live worker with the fewest engines bound, the first among equals (-1: none): where a
  // join's rebalancing moves engines, whatever the policy. O(workers): joins are rare.
  int fewest_engines(int stage) const {
    const Stage& st = stages_[static_cast<std::size_t>(stage)];
    int best = -1;
    for (std::size_t i = 0; i < st.live.size(); ++i)
      if (st.live[i] != 0 &&
          (best < 0 || st.engines[i] < st.engines[static_cast<std::size_t>(best)]))
        best = static_cast<int>(i);
    return best;
  }

  // The live worker with the fewest tokens still to process on its engines, then the fewest
  // engines, then the first (-1: none): where a join's rebalancing under `least_work` moves
  // engines. O(workers).
  int least_work(int stage) const {
    const Stage& st = stages_[static_cast<std::size_t>(stage)];
    int best = -1;
    for (std::size_t i = 0; i < st.live.size(); ++i) {
      if (st.live[i] == 0) continue;
      const auto b = static_cast<std::size_t>(best);
      if (best < 0 || st.work[i] < st.work[b] ||
          (st.work[i] == st.work[b] && st.engines[i] < st.engines[b]))
        best = static_cast<int>(i);
    }
    return best;
  }
  // The live worker with the most tokens still to process, then the most engines, then the first
  // (-1: none): where a join's rebalancing under `least_work` takes engines from. O(workers).
  int most_work(int stage) const {
    const Stage& st = stages_[static_cast<std::size_t>(stage)];
    int best = -1;
    for (std::size_t i = 0; i < st.live.size(); ++i) {
      if (st.live[i] == 0) continue;
      const auto b = static_cast<std::size_t>(best);
      if (best < 0 || st.work[i] > st.work[b] ||
          (st.work[i] == st.work[b] && st.engines[i] > st.engines[b]))
        best = static_cast<int>(i);
    }
    return best;
  }

  std::int64_t engines(int stage, int index) const {
    return stages_[static_cast<std::size_t>(stage)].engines[static_cast<std::size_t>(index)];
  }
  std::int64_t work(int stage, int index) const {
    return stages_[static_cast<std::size_t>(stage)].work[static_cast<std::size_t>(index)];
  }

 private:
  struct Key {
    std::int64_t first = 0;    // least_work: tokens; fewest_engines: engines
    std::int64_t engines = 0;  // least_work's tie-breaker (0 under fewest_engines)
    std::uint32_t index = 0;
    bool operator<(const Key& o) const {
      if (first != o.first) return first < o.first;
      if (engines != o.engines) return engines < o.engines;
      return index < o.index;
    }
  };
  struct Stage {
    std::vector<std::int64_t> engines, work;
    std::vector<std::uint8_t> live, marked;
    std::vector<std::uint32_t> dirty;
    IndexedHeap<Key> heap;
    std::set<int> in_turn;  // round_robin: the live workers, in order
    int last = -1;          // round_robin: the worker chosen last
  };
  Stage& at(int stage) {
    MLSIM_CHECK(stage > 0 && static_cast<std::size_t>(stage) < stages_.size(),
                "a stage boundary's router (stages after the first)");
    return stages_[static_cast<std::size_t>(stage)];
  }
  // Worker i's key, with `less_one` engines fewer.
  Key key(const Stage& st, std::size_t i, std::int64_t less_one = 0) const {
    const std::int64_t engines = st.engines[i] - less_one;
    if (policy_ == StageRouting::kLeastWork)
      return {st.work[i], engines, static_cast<std::uint32_t>(i)};
    return {engines, 0, static_cast<std::uint32_t>(i)};
  }
  // The key without the index: what decides whether a move is worth it.
  static std::pair<std::int64_t, std::int64_t> primary(const Key& k) {
    return {k.first, k.engines};
  }
  void mark(Stage& st, int index) {
    const auto i = static_cast<std::size_t>(index);
    if (st.marked[i] != 0) return;
    st.marked[i] = 1;
    st.dirty.push_back(static_cast<std::uint32_t>(index));
  }
  void refresh(Stage& st) {
    for (const std::uint32_t i : st.dirty) {
      st.marked[i] = 0;
      if (st.live[i] != 0) st.heap.update(i, key(st, i));
    }
    st.dirty.clear();
  }

  StageRouting policy_;
  std::vector<Stage> stages_;
};

}  // namespace mlsim::serving
