#pragma once
// Max-min fair rates by progressive filling, on a small problem the caller builds: links with
// capacities, flows crossing some of them. The flow backend without route classes (its default)
// builds one problem per connected component of flows that a change touched; with route classes
// it runs the same filling in place on its own link lists (FluidNetwork::fill_in_place), and this
// solver is its reference in the property tests. Tests also build textbook cases by hand.
//
// Progressive filling: all unfrozen flows grow at the same rate until some link is full; the
// flows crossing it are frozen at that link's fair share, the share is taken out of the other
// links they cross, and filling goes on with the rest. The next link to fill is the one with the
// smallest (remaining capacity / unfrozen flows); ties go to the lower link index: results are
// deterministic.
//
// A flow may stand for `weight` identical flows (same links), as a route class of the flow
// backend stands for its members: a solve costs the number of distinct routes, not of
// transfers. A weight-1 flow is computed with exactly the arithmetic of a lone flow.
//
// The heap holds one entry per link, keyed by its share when last computed. Freezing a round's
// flows can only raise the (exact) share of the other links they cross, so a key that was not
// recomputed is a lower bound: it is refreshed only when it reaches the top (in place, one sift
// down). Rounding can lower a share by an ulp; such a key is recomputed and moved up at once. The
// order in which links fill is thus exactly the order of an eager heap, at O(log L) per link
// that reaches the top instead of one heap entry per (round, touched link). One solve costs
// O(H + T log L) for H (flow, link) crossings, L links and T refreshes at the top.
//
// Storage is reused between solves; solving a problem of the same size again allocates nothing.
#include <cstdint>
#include <span>
#include <vector>

namespace mlsim {

class MaxMinSolver {
 public:
  void clear();
  // Returns the link's index in this problem. capacity > 0 (bytes/s or any unit).
  std::uint32_t add_link(double capacity);
  // Adds a flow crossing the given links (indices from add_link, at least one) that stands for
  // `weight` >= 1 identical flows; returns its index. Each of them gets the flow's rate.
  std::uint32_t add_flow(std::span<const std::uint32_t> links, std::uint32_t weight = 1);
  // The problem link that froze flow `f` in the last solve (its bottleneck).
  std::uint32_t bottleneck(std::uint32_t f) const { return frozen_by_[f]; }
  // Rates per flow index, in the capacity unit. Valid until the next clear().
  const std::vector<double>& solve();

  std::size_t links() const { return capacity_.size(); }
  std::size_t flows() const { return flow_begin_.empty() ? 0 : flow_begin_.size() - 1; }

 private:
  // Min-heap of links on (key, link index), with each link's place in `place_`.
  bool heap_before(std::uint32_t a, std::uint32_t b) const {
    return key_[a] < key_[b] || (key_[a] == key_[b] && a < b);
  }
  void sift_up(std::size_t i);
  void sift_down(std::size_t i);
  void heap_pop();

  // Input.
  std::vector<double> capacity_;
  std::vector<std::uint32_t> flow_begin_{0};  // flow f crosses flow_links_[begin[f], begin[f+1])
  std::vector<std::uint32_t> flow_links_;
  std::vector<std::uint32_t> weight_;
  // Working state.
  std::vector<double> left_;             // capacity not yet given to frozen flows
  std::vector<std::uint32_t> unfrozen_;  // unfrozen flows per link (weighted)
  std::vector<double> key_;              // heap key: the link's share when last computed
  std::vector<std::uint8_t> stale_;      // the share may have risen since
  std::vector<std::uint32_t> heap_, place_;
  std::vector<std::uint32_t> link_begin_;  // link l is crossed by link_flows_[begin[l], begin[l+1])
  std::vector<std::uint32_t> link_flows_;
  std::vector<std::uint8_t> frozen_;
  std::vector<std::uint32_t> touched_, touched_round_;  // links whose share a freeze changed
  std::vector<double> rate_;
  std::vector<std::uint32_t> frozen_by_;
};

}  // namespace mlsim
