// NVLS-style all-reduce (NVLink SHARP): the reduction happens in the switch. Every participant
// sends each piece once to the switch all participants hang off; when the switch holds a piece
// from every participant it sends the sum to each of them (the multicast of NVSwitch gen 3, here
// one transfer per participant, each on its own switch-to-GPU link). Per participant a piece
// crosses its link once up and once down, against 2(n-1)/n times each way for a ring, and up
// and down overlap across pieces. The switch does not count as a rank.
#include <vector>

#include "sim_core/collectives/algorithm.hpp"

namespace mlsim::collectives {
namespace {

class Nvls final : public CollectiveAlgorithm {
 public:
  // Participant index n (one past the last rank) is the switch.
  Nvls(Collective& owner, Sender& sender, std::uint32_t n, const CollectiveSpec& spec)
      : CollectiveAlgorithm(owner, sender),
        n_(n),
        chunks_(static_cast<std::uint32_t>(spec.chunks)),
        tensor_(spec.bytes),
        arrived_(chunks_, 0),
        needed_(std::uint64_t{n} * chunks_) {}

  void start() override {
    if (n_ < 2) {
      finished();
      return;
    }
    for (std::uint32_t c = 0; c < chunks_; ++c)
      for (std::uint32_t i = 0; i < n_; ++i) send(i, n_, tag(kUp, c), size(c));
  }

  void on_message(const Message& m) override {
    const auto c = static_cast<std::uint32_t>(m.tag >> 1);
    if ((m.tag & 1) == kUp) {
      if (++arrived_[c] < n_) return;
      // Piece c starts at participant c mod n, so that the switch's sends spread.
      for (std::uint32_t k = 0; k < n_; ++k) send(n_, (c + k) % n_, tag(kDown, c), size(c));
    } else if (++received_ == needed_) {
      finished();
    }
  }

  double progress() const override { return fraction_done(received_, needed_); }
  int ranks() const override { return static_cast<int>(n_); }

 private:
  static constexpr std::uint64_t kUp = 0, kDown = 1;
  static std::uint64_t tag(std::uint64_t phase, std::uint32_t c) {
    return (std::uint64_t{c} << 1) | phase;
  }
  Bytes size(std::uint32_t c) const { return piece(tensor_, chunks_, c); }

  const std::uint32_t n_, chunks_;
  const Bytes tensor_;
  std::vector<std::uint32_t> arrived_;  // participants' copies of each piece at the switch
  const std::uint64_t needed_;
  std::uint64_t received_ = 0;
};

}  // namespace

std::unique_ptr<CollectiveAlgorithm> make_nvls(Collective& owner, Sender& sender,
                                               std::uint32_t participants,
                                               const CollectiveSpec& spec) {
  return std::make_unique<Nvls>(owner, sender, participants, spec);
}

}  // namespace mlsim::collectives
