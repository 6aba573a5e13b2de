#pragma once
// Max-min fair rates by progressive filling, on a small problem the caller builds: links with
// capacities, flows crossing some of them. The flow backend builds one problem per connected
// component of flows that a change touched; tests build textbook cases by hand.
//
// Progressive filling: all unfrozen flows grow at the same rate until some link is full; the
// flows crossing it are frozen at that link's fair share, the share is taken out of the other
// links they cross, and filling goes on with the rest. The next link to fill is the one with the
// smallest (remaining capacity / unfrozen flows), kept in a heap with one fresh entry per link
// whose share a freezing round lowered, so one solve costs O(H + R log R) for H (flow, link)
// crossings and R (freezing round, touched link) pairs (R <= H; R << H when many flows share
// few links). Ties go to the lower link index: results are
// deterministic.
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
  // Adds a flow crossing the given links (indices from add_link, at least one); returns its index.
  std::uint32_t add_flow(std::span<const std::uint32_t> links);
  // Rates per flow index, in the capacity unit. Valid until the next clear().
  const std::vector<double>& solve();

  std::size_t links() const { return capacity_.size(); }
  std::size_t flows() const { return flow_begin_.empty() ? 0 : flow_begin_.size() - 1; }

 private:
  struct HeapEntry {
    double share;
    std::uint32_t link;
    std::uint32_t version;
  };

  // Input.
  std::vector<double> capacity_;
  std::vector<std::uint32_t> flow_begin_{0};  // flow f crosses flow_links_[begin[f], begin[f+1])
  std::vector<std::uint32_t> flow_links_;
  // Working state.
  std::vector<double> left_;             // capacity not yet given to frozen flows
  std::vector<std::uint32_t> unfrozen_;  // unfrozen flows per link
  std::vector<std::uint32_t> version_;
  std::vector<std::uint32_t> link_begin_;  // link l is crossed by link_flows_[begin[l], begin[l+1])
  std::vector<std::uint32_t> link_flows_;
  std::vector<std::uint8_t> frozen_;
  std::vector<HeapEntry> heap_;
  std::vector<std::uint32_t> touched_, touched_round_;  // links whose share a freeze lowered
  std::vector<double> rate_;
};

}  // namespace mlsim
