// Ring all-reduce: reduce-scatter then all-gather, 2(n-1) steps, each piece moving on as soon as
// its previous step arrived. Reduce-scatter runs the first n-1 steps, all-gather the last n-1.
//
// Channels (like NCCL's): the tensor is split over `channels` rings that run at once. Channel k
// visits the participants region by region (hosts under one switch: a node's GPUs under its
// NVSwitch, a rack under its ToR; rat_plan.hpp's find_regions), each region's members rotated by
// k, so that each channel enters and leaves a region through different hosts (on a multi-node
// GPU ring: through different GPUs' NICs). Without link conditions, every channel is the
// participant order.
#include <vector>

#include "sim_core/collectives/algorithm.hpp"
#include "sim_core/collectives/rat_plan.hpp"

namespace mlsim::collectives {
namespace {

class Ring final : public CollectiveAlgorithm {
 public:
  Ring(Collective& owner, Sender& sender, const std::vector<NodeId>& participants,
       const CollectiveSpec& spec, const LinkConditions* links)
      : CollectiveAlgorithm(owner, sender),
        n_(static_cast<std::uint32_t>(participants.size())),
        chunks_(static_cast<std::uint32_t>(spec.chunks)),
        channels_(static_cast<std::uint32_t>(spec.channels)),
        first_step_(spec.operation == Operation::kAllGather ? n_ - 1 : 0),
        end_step_(spec.operation == Operation::kReduceScatter ? n_ - 1 : 2 * (n_ - 1)),
        needed_(std::uint64_t{n_} * (end_step_ - first_step_) * chunks_ * channels_) {
    // Segments of channel k are B_k/n or B_k/n + 1 bytes (the first B_k mod n segments), B_k
    // the channel's share of S; their pieces are listed once here, so that the per-message path
    // has no division.
    for (std::uint32_t k = 0; k < channels_; ++k) {
      const Bytes share = piece(spec.bytes, channels_, k);
      const Bytes small{share.count / n_}, large{small.count + 1};
      long_segments_.push_back(static_cast<std::uint32_t>(share.count % n_));
      for (std::uint32_t c = 0; c < chunks_; ++c) {
        small_pieces_.push_back(piece(small, chunks_, c));
        large_pieces_.push_back(piece(large, chunks_, c));
      }
    }
    order_.resize(std::size_t{n_} * channels_);
    position_.resize(order_.size());
    std::vector<Region> regions;
    if (links != nullptr && channels_ > 1) regions = find_regions(links->topology(), participants);
    for (std::uint32_t k = 0; k < channels_; ++k) {
      std::uint32_t* order = &order_[std::size_t{k} * n_];
      if (regions.empty()) {
        for (std::uint32_t p = 0; p < n_; ++p) order[p] = p;
      } else {
        std::uint32_t p = 0;
        for (const Region& r : regions) {
          const auto m = static_cast<std::uint32_t>(r.members.size());
          for (std::uint32_t j = 0; j < m; ++j) order[p++] = r.members[(j + k) % m];
        }
      }
      for (std::uint32_t p = 0; p < n_; ++p) position_[std::size_t{k} * n_ + order[p]] = p;
    }
  }

  void start() override {
    if (needed_ == 0) {
      finished();
      return;
    }
    for (std::uint32_t p = 0; p < n_; ++p)
      for (std::uint32_t k = 0; k < channels_; ++k)
        for (std::uint32_t c = 0; c < chunks_; ++c) send_step(p, first_step_, k * chunks_ + c);
  }

  void on_message(const Message& m) override {
    const auto step = static_cast<std::uint32_t>(m.tag >> 32);
    const auto piece_index = static_cast<std::uint32_t>(m.tag);
    if (step + 1 < end_step_) {
      const std::uint32_t k = channels_ == 1 ? 0 : piece_index / chunks_;
      send_step(position_[std::size_t{k} * n_ + m.to], step + 1, piece_index);
    }
    if (++received_ == needed_) finished();
  }

  double progress() const override { return fraction_done(received_, needed_); }
  bool rearm() override {
    received_ = 0;
    return true;
  }
  int ranks() const override { return static_cast<int>(n_); }

 private:
  // In step s the participant at ring position p sends segment (p - s) mod n (both phases: after
  // n-1 steps of reduce-scatter, position p holds the reduced segment p+1 and the all-gather
  // carries it on). piece_index = channel x chunks + chunk.
  void send_step(std::uint32_t p, std::uint32_t step, std::uint32_t piece_index) {
    const std::uint32_t k = channels_ == 1 ? 0 : piece_index / chunks_;
    // (p - s) mod n without a division: s < 2n and p < n.
    std::uint32_t segment = p + 2 * n_ - step;
    if (segment >= n_) segment -= n_;
    if (segment >= n_) segment -= n_;
    const Bytes bytes =
        segment < long_segments_[k] ? large_pieces_[piece_index] : small_pieces_[piece_index];
    const std::uint32_t next = p + 1 == n_ ? 0 : p + 1;
    const std::uint32_t* order = &order_[std::size_t{k} * n_];
    send(order[p], order[next], (std::uint64_t{step} << 32) | piece_index, bytes);
  }

  const std::uint32_t n_, chunks_, channels_;
  const std::uint32_t first_step_, end_step_;  // the steps [first, end) of the 2(n-1)
  const std::uint64_t needed_;
  std::vector<std::uint32_t> long_segments_;        // per channel
  std::vector<Bytes> small_pieces_, large_pieces_;  // per (channel, chunk)
  std::vector<std::uint32_t> order_;     // per (channel, position): the participant there
  std::vector<std::uint32_t> position_;  // per (channel, participant): its position
  std::uint64_t received_ = 0;
};

}  // namespace

std::unique_ptr<CollectiveAlgorithm> make_ring(Collective& owner, Sender& sender,
                                               const std::vector<NodeId>& participants,
                                               const CollectiveSpec& spec,
                                               const LinkConditions* links) {
  return std::make_unique<Ring>(owner, sender, participants, spec, links);
}

}  // namespace mlsim::collectives
