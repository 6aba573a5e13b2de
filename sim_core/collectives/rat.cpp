// RAT, the Resilient Allreduce Tree: per piece, gather to each region's aggregator, reduce up a
// tree of regions, broadcast back down the tree and out to every host. The plan (regions,
// aggregators, tree) comes from rat_plan.hpp.
//
// Per piece, every host but the root's aggregator receives the result once and every host but
// one aggregator per region sends its piece once, so a piece costs 2(n-1) messages of S/C bytes
// whatever the regions and the tree: n - r gathers, r - 1 reductions up, r - 1 broadcasts down,
// n - r scatters (n hosts, r regions).
//
// The data flow is followed, not only counted: host i contributes the signature mix64(i + 1),
// reductions add signatures, and a host holds the result of a piece when what it received sums
// to every host's signature. A lost or doubled contribution shows up in verified_pieces().
#include <algorithm>
#include <optional>
#include <vector>

#include "sim_core/base/error.hpp"
#include "sim_core/collectives/algorithm.hpp"
#include "sim_core/collectives/rat_plan.hpp"
#include "sim_core/engine/random.hpp"

namespace mlsim::collectives {
namespace {

class Rat final : public CollectiveAlgorithm {
 public:
  Rat(Collective& owner, Sender& sender, const std::vector<NodeId>& participants,
      const CollectiveSpec& spec, const LinkConditions& links)
      : CollectiveAlgorithm(owner, sender),
        planner_(links, participants, spec.flow_label),
        n_(static_cast<std::uint32_t>(participants.size())),
        regions_(static_cast<std::uint32_t>(planner_.regions().size())),
        chunks_(static_cast<std::uint32_t>(spec.chunks)),
        tensor_(spec.bytes),
        needed_(2 * std::uint64_t{n_ - 1} * chunks_),
        window_(spec.window <= 0 ? ~0u : static_cast<std::uint32_t>(spec.window)),
        outstanding_(n_, 0),
        gathers_(n_),
        state_(std::size_t{regions_} * chunks_),
        trees_(chunks_),
        result_(chunks_, 0) {
    for (std::uint32_t i = 0; i < n_; ++i) everyone_ += signature(i);
  }

  void start() override {
    if (needed_ == 0) {
      finished();
      return;
    }
    // Aggregators are fixed now for every piece: the gathers leave at once.
    aggregators_.reserve(std::size_t{regions_} * chunks_);
    for (std::uint32_t c = 0; c < chunks_; ++c) {
      const std::vector<std::uint32_t> a = planner_.aggregators(c);
      aggregators_.insert(aggregators_.end(), a.begin(), a.end());
      for (std::uint32_t r = 0; r < regions_; ++r) at(r, c).sum = signature(a[r]);
    }
    plan_gathers();
    for (std::uint32_t i = 0; i < n_; ++i) release_gathers(i);
    // Regions of one host have nothing to gather.
    for (std::uint32_t c = 0; c < chunks_; ++c)
      for (std::uint32_t r = 0; r < regions_; ++r)
        if (planner_.regions()[r].members.size() == 1) gathered(r, c);
  }

  void on_message(const Message& m) override {
    const auto c = static_cast<std::uint32_t>(m.tag >> 2);
    const std::uint32_t r = planner_.region_of(m.to);
    switch (m.tag & 3) {
      case kGather: {
        State& s = at(r, c);
        s.sum += signature(m.from);
        if (++s.gathered + 1 == planner_.regions()[r].members.size()) gathered(r, c);
        break;
      }
      case kUp: {
        State& s = at(r, c);
        s.sum += at(planner_.region_of(m.from), c).sum;
        ++s.children_in;
        forward_if_ready(r, c);
        break;
      }
      case kDown:
        holds(c);
        broadcast(r, c);
        break;
      default:  // kScatter
        holds(c);
        break;
    }
    --outstanding_[m.from];
    release_gathers(m.from);
    if (++received_ == needed_) finished();
  }

  double progress() const override { return fraction_done(received_, needed_); }
  int ranks() const override { return static_cast<int>(n_); }
  std::optional<std::uint64_t> verified_pieces() const override { return verified_; }

 private:
  static constexpr std::uint64_t kGather = 0, kUp = 1, kDown = 2, kScatter = 3;
  // Per (region, piece).
  struct State {
    std::uint64_t sum = 0;  // signatures reduced so far at the aggregator
    std::uint32_t gathered = 0, children_in = 0;
    bool local_done = false, forwarded = false;
  };

  static std::uint64_t tag(std::uint64_t phase, std::uint32_t c) {
    return (std::uint64_t{c} << 2) | phase;
  }
  static std::uint64_t signature(std::uint32_t participant) { return mix64(participant + 1ull); }
  State& at(std::uint32_t r, std::uint32_t c) { return state_[std::size_t{c} * regions_ + r]; }
  std::uint32_t aggregator(std::uint32_t r, std::uint32_t c) const {
    return aggregators_[std::size_t{c} * regions_ + r];
  }
  Bytes size(std::uint32_t c) const { return piece(tensor_, chunks_, c); }

  // A host sends one piece to each of its region's aggregators in turn, starting with the
  // aggregator after itself, then a second piece to each, and so on: at each step the hosts of a
  // region send to different aggregators, as in an all-to-all, instead of all sending piece c to
  // the same host at once (an incast that would idle the other NICs) [inferred].
  void plan_gathers() {
    std::vector<std::uint32_t> position(n_, 0);  // index of a participant in its region
    for (const Region& g : planner_.regions())
      for (std::uint32_t k = 0; k < g.members.size(); ++k) position[g.members[k]] = k;
    struct Gather {
      std::uint32_t occurrence, step, chunk;  // occurrence: earlier pieces to the same aggregator
    };
    std::vector<Gather> order;
    std::vector<std::uint32_t> sent_to(n_, 0);
    for (std::uint32_t i = 0; i < n_; ++i) {
      const std::uint32_t r = planner_.region_of(i);
      const auto m = static_cast<std::uint32_t>(planner_.regions()[r].members.size());
      order.clear();
      for (std::uint32_t c = 0; c < chunks_; ++c) {
        const std::uint32_t agg = aggregator(r, c);
        if (agg != i) order.push_back({sent_to[agg]++, (position[agg] + m - position[i]) % m, c});
      }
      for (const Gather& g : order) sent_to[aggregator(r, g.chunk)] = 0;
      std::sort(order.begin(), order.end(), [](const Gather& a, const Gather& b) {
        if (a.occurrence != b.occurrence) return a.occurrence < b.occurrence;
        return a.step != b.step ? a.step < b.step : a.chunk < b.chunk;
      });
      // Kept in reverse, so that the next one is popped from the back.
      for (auto g = order.rbegin(); g != order.rend(); ++g) gathers_[i].push_back(g->chunk);
    }
  }

  // Gathers wait until the host has a free send slot, so that reductions, broadcasts and
  // scatters (which other hosts wait for) never queue behind a host's own remaining gathers: the
  // tree's messages have priority [inferred]. Without a window, all gathers leave at once.
  void release_gathers(std::uint32_t i) {
    std::vector<std::uint32_t>& pending = gathers_[i];
    while (!pending.empty() && outstanding_[i] < window_) {
      const std::uint32_t c = pending.back();
      pending.pop_back();
      post(i, aggregator(planner_.region_of(i), c), tag(kGather, c), size(c));
    }
  }

  void post(std::uint32_t from, std::uint32_t to, std::uint64_t t, Bytes bytes) {
    ++outstanding_[from];
    send(from, to, t, bytes);
  }

  // The tree of a piece is chosen when its first region has gathered it, from the link
  // conditions of that moment (later pieces see later failures).
  const RegionTree& tree(std::uint32_t c) {
    if (!trees_[c]) {
      const std::span<const std::uint32_t> a(&aggregators_[std::size_t{c} * regions_], regions_);
      trees_[c] = planner_.tree(c, a);
    }
    return *trees_[c];
  }

  void gathered(std::uint32_t r, std::uint32_t c) {
    at(r, c).local_done = true;
    forward_if_ready(r, c);
  }

  void forward_if_ready(std::uint32_t r, std::uint32_t c) {
    State& s = at(r, c);
    const RegionTree& t = tree(c);
    if (!s.local_done || s.children_in < t.children[r].size()) return;
    MLSIM_CHECK(!s.forwarded, "a region reduced a piece twice");
    s.forwarded = true;
    if (r == t.root) {
      result_[c] = s.sum;
      holds(c);  // the root's aggregator
      broadcast(r, c);
    } else {
      post(aggregator(r, c), aggregator(t.parent[r], c), tag(kUp, c), size(c));
    }
  }

  // Down the tree first (the other regions wait for it), then to the region's own hosts.
  void broadcast(std::uint32_t r, std::uint32_t c) {
    const std::uint32_t from = aggregator(r, c);
    for (std::uint32_t child : tree(c).children[r])
      post(from, aggregator(child, c), tag(kDown, c), size(c));
    for (std::uint32_t m : planner_.regions()[r].members)
      if (m != from) post(from, m, tag(kScatter, c), size(c));
  }

  void holds(std::uint32_t c) {
    if (result_[c] == everyone_) ++verified_;
  }

  RatPlanner planner_;
  const std::uint32_t n_, regions_, chunks_;
  const Bytes tensor_;
  const std::uint64_t needed_;
  const std::uint32_t window_;              // the Sender's, ~0 for no limit
  std::vector<std::uint32_t> outstanding_;  // messages handed to the sender, per host
  std::vector<std::vector<std::uint32_t>>
      gathers_;                             // pieces still to gather, per host (last first)
  std::vector<std::uint32_t> aggregators_;  // per (piece, region)
  std::vector<State> state_;
  std::vector<std::optional<RegionTree>> trees_;
  std::vector<std::uint64_t> result_;  // the root's sum, per piece
  std::uint64_t everyone_ = 0;
  std::uint64_t received_ = 0, verified_ = 0;
};

}  // namespace

std::unique_ptr<CollectiveAlgorithm> make_rat(Collective& owner, Sender& sender,
                                              const std::vector<NodeId>& participants,
                                              const CollectiveSpec& spec,
                                              const LinkConditions& links) {
  return std::make_unique<Rat>(owner, sender, participants, spec, links);
}

}  // namespace mlsim::collectives
