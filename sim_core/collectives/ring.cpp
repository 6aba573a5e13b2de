// Ring all-reduce: reduce-scatter then all-gather, 2(n-1) steps, each piece moving on as soon as
// its previous step arrived. Reduce-scatter runs the first n-1 steps, all-gather the last n-1.
#include <vector>

#include "sim_core/collectives/algorithm.hpp"

namespace mlsim::collectives {
namespace {

class Ring final : public CollectiveAlgorithm {
 public:
  Ring(Collective& owner, Sender& sender, std::uint32_t n, const CollectiveSpec& spec)
      : CollectiveAlgorithm(owner, sender),
        n_(n),
        chunks_(static_cast<std::uint32_t>(spec.chunks)),
        first_step_(spec.operation == Operation::kAllGather ? n - 1 : 0),
        end_step_(spec.operation == Operation::kReduceScatter ? n - 1 : 2 * (n - 1)),
        needed_(std::uint64_t{n} * (end_step_ - first_step_) * chunks_) {
    // Segments are S/n or S/n + 1 bytes (the first S mod n segments); their pieces are listed
    // once here, so that the per-message path has no division.
    const Bytes small{spec.bytes.count / n}, large{small.count + 1};
    long_segments_ = static_cast<std::uint32_t>(spec.bytes.count % n);
    for (std::uint32_t c = 0; c < chunks_; ++c) {
      small_pieces_.push_back(piece(small, chunks_, c));
      large_pieces_.push_back(piece(large, chunks_, c));
    }
  }

  void start() override {
    if (needed_ == 0) {
      finished();
      return;
    }
    for (std::uint32_t i = 0; i < n_; ++i)
      for (std::uint32_t c = 0; c < chunks_; ++c) send_step(i, first_step_, c);
  }

  void on_message(const Message& m) override {
    const auto step = static_cast<std::uint32_t>(m.tag >> 32);
    const auto c = static_cast<std::uint32_t>(m.tag);
    if (step + 1 < end_step_) send_step(m.to, step + 1, c);
    if (++received_ == needed_) finished();
  }

  double progress() const override {
    return needed_ ? static_cast<double>(received_) / static_cast<double>(needed_) : 1.0;
  }
  int ranks() const override { return static_cast<int>(n_); }

 private:
  // In step s participant i sends segment (i - s) mod n (both phases: after n-1 steps of
  // reduce-scatter, i holds the reduced segment i+1 and the all-gather carries it on).
  void send_step(std::uint32_t i, std::uint32_t step, std::uint32_t c) {
    // (i - s) mod n without a division: s < 2n and i < n.
    std::uint32_t segment = i + 2 * n_ - step;
    if (segment >= n_) segment -= n_;
    if (segment >= n_) segment -= n_;
    const Bytes bytes = segment < long_segments_ ? large_pieces_[c] : small_pieces_[c];
    const std::uint32_t next = i + 1 == n_ ? 0 : i + 1;
    send(i, next, (std::uint64_t{step} << 32) | c, bytes);
  }

  const std::uint32_t n_, chunks_;
  const std::uint32_t first_step_, end_step_;  // the steps [first, end) of the 2(n-1)
  const std::uint64_t needed_;
  std::uint32_t long_segments_ = 0;
  std::vector<Bytes> small_pieces_, large_pieces_;  // per piece index
  std::uint64_t received_ = 0;
};

}  // namespace

std::unique_ptr<CollectiveAlgorithm> make_ring(Collective& owner, Sender& sender,
                                               std::uint32_t participants,
                                               const CollectiveSpec& spec) {
  return std::make_unique<Ring>(owner, sender, participants, spec);
}

}  // namespace mlsim::collectives
