#include "sim_core/network/max_min.hpp"

#include <algorithm>

#include "sim_core/base/error.hpp"

namespace mlsim {

void MaxMinSolver::clear() {
  capacity_.clear();
  flow_begin_.assign(1, 0);
  flow_links_.clear();
}

std::uint32_t MaxMinSolver::add_link(double capacity) {
  MLSIM_CHECK(capacity > 0, "max-min link with non-positive capacity");
  capacity_.push_back(capacity);
  return static_cast<std::uint32_t>(capacity_.size() - 1);
}

std::uint32_t MaxMinSolver::add_flow(std::span<const std::uint32_t> links, std::uint32_t weight) {
  MLSIM_CHECK(!links.empty(), "max-min flow crossing no link");
  MLSIM_CHECK(weight >= 1, "max-min flow of weight zero");
  for (std::uint32_t l : links) {
    MLSIM_CHECK(l < capacity_.size(), "max-min flow crossing an unknown link");
    flow_links_.push_back(l);
  }
  flow_begin_.push_back(static_cast<std::uint32_t>(flow_links_.size()));
  weight_.resize(flows());
  weight_.back() = weight;
  return static_cast<std::uint32_t>(flow_begin_.size() - 2);
}

void MaxMinSolver::sift_up(std::size_t i) {
  const std::uint32_t l = heap_[i];
  while (i > 0) {
    const std::size_t parent = (i - 1) / 2;
    if (!heap_before(l, heap_[parent])) break;
    heap_[i] = heap_[parent];
    place_[heap_[i]] = static_cast<std::uint32_t>(i);
    i = parent;
  }
  heap_[i] = l;
  place_[l] = static_cast<std::uint32_t>(i);
}

void MaxMinSolver::sift_down(std::size_t i) {
  const std::uint32_t l = heap_[i];
  const std::size_t n = heap_.size();
  for (;;) {
    std::size_t child = 2 * i + 1;
    if (child >= n) break;
    if (child + 1 < n && heap_before(heap_[child + 1], heap_[child])) ++child;
    if (!heap_before(heap_[child], l)) break;
    heap_[i] = heap_[child];
    place_[heap_[i]] = static_cast<std::uint32_t>(i);
    i = child;
  }
  heap_[i] = l;
  place_[l] = static_cast<std::uint32_t>(i);
}

void MaxMinSolver::heap_pop() {
  const std::uint32_t last = heap_.back();
  heap_.pop_back();
  if (heap_.empty()) return;
  heap_[0] = last;
  sift_down(0);
}

const std::vector<double>& MaxMinSolver::solve() {
  const std::size_t nl = capacity_.size();
  const std::size_t nf = flows();
  left_.assign(capacity_.begin(), capacity_.end());
  unfrozen_.assign(nl, 0);
  frozen_.assign(nf, 0);
  rate_.assign(nf, 0.0);
  frozen_by_.assign(nf, 0);

  // Links -> flows, in compressed form; unfrozen_ counts weights.
  link_begin_.assign(nl + 1, 0);
  for (std::uint32_t f = 0; f < nf; ++f)
    for (std::uint32_t i = flow_begin_[f]; i < flow_begin_[f + 1]; ++i) {
      ++link_begin_[flow_links_[i] + 1];
      unfrozen_[flow_links_[i]] += weight_[f];
    }
  for (std::size_t l = 0; l < nl; ++l) link_begin_[l + 1] += link_begin_[l];
  link_flows_.resize(flow_links_.size());
  place_.assign(link_begin_.begin(), link_begin_.end() - 1);  // borrowed as a fill cursor
  for (std::uint32_t f = 0; f < nf; ++f)
    for (std::uint32_t i = flow_begin_[f]; i < flow_begin_[f + 1]; ++i)
      link_flows_[place_[flow_links_[i]]++] = f;

  // Min-heap on (share, link): every link that carries a flow, keyed by its share.
  key_.resize(nl);
  stale_.assign(nl, 0);
  heap_.clear();
  place_.assign(nl, 0);
  for (std::uint32_t l = 0; l < nl; ++l) {
    if (unfrozen_[l] == 0) continue;
    key_[l] = left_[l] / unfrozen_[l];
    place_[l] = static_cast<std::uint32_t>(heap_.size());
    heap_.push_back(l);
  }
  for (std::size_t i = heap_.size() / 2; i-- > 0;) sift_down(i);

  touched_round_.assign(nl, 0);
  std::uint32_t round = 0;
  while (!heap_.empty()) {
    const std::uint32_t l = heap_.front();
    if (unfrozen_[l] == 0) {  // all its flows were frozen by other links
      heap_pop();
      continue;
    }
    if (stale_[l]) {  // its share rose since its key was computed: refresh it in place
      key_[l] = left_[l] / unfrozen_[l];
      stale_[l] = 0;
      sift_down(0);
      continue;
    }
    heap_pop();
    // Rounding can leave a hair of negative capacity; the share never goes below zero.
    const double share = std::max(0.0, left_[l] / unfrozen_[l]);
    // Freezing the flows of l changes the shares of the other links they cross; each such link
    // is looked at once all of them are frozen.
    ++round;
    touched_.clear();
    for (std::uint32_t i = link_begin_[l]; i < link_begin_[l + 1]; ++i) {
      const std::uint32_t f = link_flows_[i];
      if (frozen_[f]) continue;
      frozen_[f] = 1;
      rate_[f] = share;
      frozen_by_[f] = l;
      const std::uint32_t w = weight_[f];
      for (std::uint32_t j = flow_begin_[f]; j < flow_begin_[f + 1]; ++j) {
        const std::uint32_t m = flow_links_[j];
        left_[m] -= share * w;
        unfrozen_[m] -= w;
        if (touched_round_[m] != round) {
          touched_round_[m] = round;
          touched_.push_back(m);
        }
      }
    }
    for (std::uint32_t m : touched_) {
      if (m == l || unfrozen_[m] == 0) continue;
      const double now = left_[m] / unfrozen_[m];
      if (now < key_[m]) {  // lowered by rounding: the key must not stay above the share
        key_[m] = now;
        stale_[m] = 0;
        sift_up(place_[m]);
      } else {
        stale_[m] = now != key_[m];
      }
    }
  }
  return rate_;
}

}  // namespace mlsim
