// Direct messages: send/recv (participant 0 to participant 1) and all-to-all (every participant
// sends S/n to every other one). Participant i sends to i+1, i+2, ... in turn, so that with a
// window the senders address different receivers at each moment instead of all the same one.
#include "sim_core/collectives/algorithm.hpp"

namespace mlsim::collectives {
namespace {

class Direct final : public CollectiveAlgorithm {
 public:
  Direct(Collective& owner, Sender& sender, std::uint32_t n, const CollectiveSpec& spec)
      : CollectiveAlgorithm(owner, sender),
        n_(n),
        senders_(spec.operation == Operation::kSendRecv ? 1 : n),
        receivers_per_sender_(spec.operation == Operation::kSendRecv ? 1 : n - 1),
        chunks_(static_cast<std::uint32_t>(spec.chunks)),
        // send_recv: the whole S to one peer; all_to_all: S/n to each peer.
        per_peer_(spec.operation == Operation::kSendRecv ? spec.bytes : piece(spec.bytes, n, 0)),
        needed_(std::uint64_t{senders_} * receivers_per_sender_ * chunks_) {}

  void start() override {
    if (needed_ == 0) {
      finished();
      return;
    }
    for (std::uint32_t c = 0; c < chunks_; ++c)
      for (std::uint32_t i = 0; i < senders_; ++i)
        for (std::uint32_t k = 1; k <= receivers_per_sender_; ++k)
          send(i, (i + k) % n_, c, piece(per_peer_, chunks_, c));
  }

  void on_message(const Message&) override {
    if (++received_ == needed_) finished();
  }

  double progress() const override { return fraction_done(received_, needed_); }
  int ranks() const override { return static_cast<int>(n_); }

 private:
  const std::uint32_t n_, senders_, receivers_per_sender_, chunks_;
  const Bytes per_peer_;
  const std::uint64_t needed_;
  std::uint64_t received_ = 0;
};

}  // namespace

std::unique_ptr<CollectiveAlgorithm> make_direct(Collective& owner, Sender& sender,
                                                 std::uint32_t participants,
                                                 const CollectiveSpec& spec) {
  return std::make_unique<Direct>(owner, sender, participants, spec);
}

}  // namespace mlsim::collectives
