// Reduce-broadcast over a k-ary tree rooted at participant 0: each piece goes up once all of a
// node's children sent theirs, then down from the root. Broadcast is the down half alone.
#include <algorithm>
#include <vector>

#include "sim_core/collectives/algorithm.hpp"

namespace mlsim::collectives {
namespace {

class Tree final : public CollectiveAlgorithm {
 public:
  Tree(Collective& owner, Sender& sender, std::uint32_t n, const CollectiveSpec& spec)
      : CollectiveAlgorithm(owner, sender),
        n_(n),
        arity_(static_cast<std::uint32_t>(spec.arity)),
        chunks_(static_cast<std::uint32_t>(spec.chunks)),
        tensor_(spec.bytes),
        broadcast_only_(spec.operation == Operation::kBroadcast),
        reduced_(std::size_t{n} * chunks_, 0),
        needed_((broadcast_only_ ? 1 : 2) * std::uint64_t{n - 1} * chunks_) {}

  void start() override {
    if (needed_ == 0) {
      finished();
      return;
    }
    if (broadcast_only_) {
      for (std::uint32_t c = 0; c < chunks_; ++c) broadcast(0, c);
      return;
    }
    for (std::uint32_t i = 1; i < n_; ++i)
      if (children(i) == 0)
        for (std::uint32_t c = 0; c < chunks_; ++c) send(i, parent(i), tag(kReduce, c), size(c));
  }

  void on_message(const Message& m) override {
    const auto c = static_cast<std::uint32_t>(m.tag >> 1);
    const std::uint32_t j = m.to;
    if ((m.tag & 1) == kReduce) {
      if (++reduced_[std::size_t{j} * chunks_ + c] == children(j)) {
        if (j == 0) {
          broadcast(0, c);
        } else {
          send(j, parent(j), tag(kReduce, c), size(c));
        }
      }
    } else {
      broadcast(j, c);
    }
    if (++received_ == needed_) finished();
  }

  double progress() const override { return fraction_done(received_, needed_); }
  int ranks() const override { return static_cast<int>(n_); }

 private:
  static constexpr std::uint64_t kReduce = 0, kBroadcast = 1;
  static std::uint64_t tag(std::uint64_t phase, std::uint32_t c) {
    return (std::uint64_t{c} << 1) | phase;
  }
  std::uint32_t parent(std::uint32_t i) const { return (i - 1) / arity_; }
  std::uint32_t first_child(std::uint32_t i) const {
    return static_cast<std::uint32_t>(std::min<std::uint64_t>(std::uint64_t{arity_} * i + 1, n_));
  }
  std::uint32_t children(std::uint32_t i) const {
    const std::uint64_t first = first_child(i);
    return static_cast<std::uint32_t>(std::min<std::uint64_t>(first + arity_, n_) - first);
  }
  Bytes size(std::uint32_t c) const { return piece(tensor_, chunks_, c); }
  void broadcast(std::uint32_t j, std::uint32_t c) {
    const std::uint32_t first = first_child(j);
    for (std::uint32_t k = 0; k < children(j); ++k) send(j, first + k, tag(kBroadcast, c), size(c));
  }

  const std::uint32_t n_, arity_, chunks_;
  const Bytes tensor_;
  const bool broadcast_only_;
  std::vector<std::uint32_t> reduced_;  // pieces received from children, per (node, piece)
  const std::uint64_t needed_;
  std::uint64_t received_ = 0;
};

}  // namespace

std::unique_ptr<CollectiveAlgorithm> make_tree(Collective& owner, Sender& sender,
                                               std::uint32_t participants,
                                               const CollectiveSpec& spec) {
  return std::make_unique<Tree>(owner, sender, participants, spec);
}

}  // namespace mlsim::collectives
