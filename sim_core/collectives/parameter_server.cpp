// Parameter-server all-reduce: workers push shards to their servers, servers send the reduced
// shard back (pull) once every worker's piece arrived. With host.ps_aggregation = R, a server
// sums each pushed piece of b bytes in b / R, one piece after another, before it counts.
#include <algorithm>
#include <vector>

#include "sim_core/collectives/algorithm.hpp"

namespace mlsim::collectives {
namespace {

class ParameterServer final : public CollectiveAlgorithm {
 public:
  ParameterServer(Collective& owner, Sender& sender, std::uint32_t n, const CollectiveSpec& spec)
      : CollectiveAlgorithm(owner, sender),
        servers_(static_cast<std::uint32_t>(spec.servers)),
        workers_(spec.placement == Placement::kDedicated ? n - servers_ : n),
        first_server_(spec.placement == Placement::kDedicated ? workers_ : 0),
        spread_(spec.placement == Placement::kSpread),
        chunks_(static_cast<std::uint32_t>(spec.chunks)),
        tensor_(spec.bytes),
        aggregation_(spec.host.ps_aggregation),
        busy_until_(servers_, Time::zero()),
        contributions_(std::size_t{servers_} * chunks_, 0),
        needed_(std::uint64_t{workers_} * servers_ * chunks_) {}

  void start() override {
    // Every worker pushes piece 0 of every shard first, so servers can start pulling early.
    // Worker w starts with shard w mod servers: with a window, the workers then push to
    // different servers at once instead of all to the same one.
    for (std::uint32_t w = 0; w < workers_; ++w)
      for (std::uint32_t c = 0; c < chunks_; ++c)
        for (std::uint32_t j = 0; j < servers_; ++j) {
          const std::uint32_t k = (j + w) % servers_;
          if (w == server(k)) {
            contributed(k, c);  // a colocated server's own piece needs no transfer
          } else {
            send(w, server(k), tag(kPush, k, c), size(k, c));
          }
        }
  }

  void on_message(const Message& m) override {
    const auto k = static_cast<std::uint32_t>((m.tag >> 1) / chunks_);
    const auto c = static_cast<std::uint32_t>((m.tag >> 1) % chunks_);
    if ((m.tag & 1) == kPush) {
      if (aggregation_.bytes_per_s > 0) {
        Time& busy = busy_until_[k];
        busy = std::max(busy, engine().now()) + transfer_time(m.bytes, aggregation_);
        engine().schedule_at(busy, [this, k, c] { contributed(k, c); });
      } else {
        contributed(k, c);
      }
    } else {
      got_one();
    }
  }

  double progress() const override { return fraction_done(pulled_, needed_); }
  int ranks() const override { return static_cast<int>(workers_); }

 private:
  static constexpr std::uint64_t kPush = 0, kPull = 1;
  std::uint64_t tag(std::uint64_t phase, std::uint32_t k, std::uint32_t c) const {
    return ((std::uint64_t{k} * chunks_ + c) << 1) | phase;
  }
  std::uint32_t server(std::uint32_t k) const {
    if (spread_) return static_cast<std::uint32_t>(std::uint64_t{k} * workers_ / servers_);
    return first_server_ + k;
  }
  Bytes size(std::uint32_t k, std::uint32_t c) const {
    return piece(piece(tensor_, servers_, k), chunks_, c);
  }
  void contributed(std::uint32_t k, std::uint32_t c) {
    if (++contributions_[std::size_t{k} * chunks_ + c] < workers_) return;
    // Server k starts its pulls at worker k (likewise staggered, so that the servers' first
    // pulls go to different workers).
    for (std::uint32_t j = 0; j < workers_; ++j) {
      const std::uint32_t w = (j + k) % workers_;
      if (w == server(k)) {
        got_one();
      } else {
        send(server(k), w, tag(kPull, k, c), size(k, c));
      }
    }
  }
  void got_one() {
    if (++pulled_ == needed_) finished();
  }

  const std::uint32_t servers_, workers_, first_server_;
  const bool spread_;
  const std::uint32_t chunks_;
  const Bytes tensor_;
  const Bandwidth aggregation_;   // 0: summing is free
  std::vector<Time> busy_until_;  // per server: when it has summed what it received so far
  std::vector<std::uint32_t> contributions_;  // workers' pieces reduced, per (shard, piece)
  const std::uint64_t needed_;
  std::uint64_t pulled_ = 0;
};

}  // namespace

std::unique_ptr<CollectiveAlgorithm> make_parameter_server(Collective& owner, Sender& sender,
                                                           std::uint32_t participants,
                                                           const CollectiveSpec& spec) {
  return std::make_unique<ParameterServer>(owner, sender, participants, spec);
}

}  // namespace mlsim::collectives
