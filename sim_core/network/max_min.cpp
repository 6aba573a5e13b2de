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

std::uint32_t MaxMinSolver::add_flow(std::span<const std::uint32_t> links) {
  MLSIM_CHECK(!links.empty(), "max-min flow crossing no link");
  for (std::uint32_t l : links) {
    MLSIM_CHECK(l < capacity_.size(), "max-min flow crossing an unknown link");
    flow_links_.push_back(l);
  }
  flow_begin_.push_back(static_cast<std::uint32_t>(flow_links_.size()));
  return static_cast<std::uint32_t>(flow_begin_.size() - 2);
}

const std::vector<double>& MaxMinSolver::solve() {
  const std::size_t nl = capacity_.size();
  const std::size_t nf = flows();
  left_.assign(capacity_.begin(), capacity_.end());
  unfrozen_.assign(nl, 0);
  version_.assign(nl, 0);
  frozen_.assign(nf, 0);
  rate_.assign(nf, 0.0);

  // Links -> flows, in compressed form.
  link_begin_.assign(nl + 1, 0);
  for (std::uint32_t l : flow_links_) ++link_begin_[l + 1];
  for (std::size_t l = 0; l < nl; ++l) {
    unfrozen_[l] = link_begin_[l + 1];
    link_begin_[l + 1] += link_begin_[l];
  }
  link_flows_.resize(flow_links_.size());
  {
    std::vector<std::uint32_t>& fill = version_;  // borrowed as a cursor, reset below
    for (std::size_t l = 0; l < nl; ++l) fill[l] = link_begin_[l];
    for (std::uint32_t f = 0; f < nf; ++f)
      for (std::uint32_t i = flow_begin_[f]; i < flow_begin_[f + 1]; ++i)
        link_flows_[fill[flow_links_[i]]++] = f;
    std::fill(version_.begin(), version_.end(), 0);
  }

  // Min-heap on (share, link).
  auto later = [](const HeapEntry& a, const HeapEntry& b) {
    return a.share > b.share || (a.share == b.share && a.link > b.link);
  };
  heap_.clear();
  for (std::uint32_t l = 0; l < nl; ++l)
    if (unfrozen_[l] > 0) heap_.push_back({left_[l] / unfrozen_[l], l, 0});
  std::make_heap(heap_.begin(), heap_.end(), later);

  touched_round_.assign(nl, 0);
  std::uint32_t round = 0;
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), later);
    const HeapEntry top = heap_.back();
    heap_.pop_back();
    const std::uint32_t l = top.link;
    if (top.version != version_[l] || unfrozen_[l] == 0) continue;  // stale entry
    // Rounding can leave a hair of negative capacity; the share never goes below zero.
    const double share = std::max(0.0, left_[l] / unfrozen_[l]);
    // Freezing the flows of l lowers the shares of the other links they cross; each such link
    // gets one fresh heap entry once all of them are frozen (older entries are stale by version).
    ++round;
    touched_.clear();
    for (std::uint32_t i = link_begin_[l]; i < link_begin_[l + 1]; ++i) {
      const std::uint32_t f = link_flows_[i];
      if (frozen_[f]) continue;
      frozen_[f] = 1;
      rate_[f] = share;
      for (std::uint32_t j = flow_begin_[f]; j < flow_begin_[f + 1]; ++j) {
        const std::uint32_t m = flow_links_[j];
        left_[m] -= share;
        --unfrozen_[m];
        ++version_[m];
        if (touched_round_[m] != round) {
          touched_round_[m] = round;
          touched_.push_back(m);
        }
      }
    }
    for (std::uint32_t m : touched_) {
      if (m == l || unfrozen_[m] == 0) continue;
      heap_.push_back({left_[m] / unfrozen_[m], m, version_[m]});
      std::push_heap(heap_.begin(), heap_.end(), later);
    }
  }
  return rate_;
}

}  // namespace mlsim
