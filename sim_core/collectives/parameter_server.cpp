// Parameter-server all-reduce: workers push shards to their servers, servers send the reduced
// shard back (pull) once every worker's piece arrived. With host.ps_aggregation = R, a server
// sums each pushed piece of b bytes in b / R, one piece after another, before it counts.
//
// Workers may enter at different times (Collective::join, as MXNet kvstore workers push a key
// when their gradient is ready): a worker's pushes leave when it joins, a server answers a
// piece's pulls once every worker's push of it arrived. Each worker is reported kSent once all
// its pushes arrived and kHolds once all its pulls arrived.
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
        element_(spec.element_bytes),
        elements_(Bytes{spec.bytes.count / spec.element_bytes}),
        aggregation_(spec.host.ps_aggregation),
        contributions_(std::size_t{servers_} * chunks_, 0),
        workers_state_(workers_, WorkerState{0, servers_ * chunks_, false}),
        needed_(std::uint64_t{workers_} * servers_ * chunks_) {
    if (aggregation_.bytes_per_s > 0) busy_until_.assign(servers_, Time::zero());
  }

  void start() override {
    for (std::uint32_t w = 0; w < workers_; ++w) join(w);
  }

  bool supports_join() const override { return true; }

  bool rearm() override {
    std::fill(contributions_.begin(), contributions_.end(), 0);
    workers_state_.assign(workers_, WorkerState{0, servers_ * chunks_, false});
    pulled_ = 0;
    return true;
  }

  // Every worker pushes piece 0 of every shard first, so servers can start pulling early.
  // Worker w starts with shard w mod servers: with a window, the workers then push to different
  // servers at once instead of all to the same one.
  void join(std::uint32_t w) override {
    MLSIM_CHECK(w < workers_ && !workers_state_[w].joined,
                "a ps participant that is no worker, or joined twice");
    workers_state_[w].joined = true;
    std::uint32_t pushes = 0;
    for (std::uint32_t k = 0; k < servers_; ++k) pushes += w == server(k) ? 0 : chunks_;
    workers_state_[w].pushes_left = pushes;
    if (pushes == 0) participant_event(w, ParticipantEvent::kSent);
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
      if (--workers_state_[m.from].pushes_left == 0)
        participant_event(m.from, ParticipantEvent::kSent);
      if (aggregation_.bytes_per_s > 0) {
        Time& busy = busy_until_[k];
        busy = std::max(busy, engine().now()) + transfer_time(m.bytes, aggregation_);
        defer(busy, [this, k, c] { contributed(k, c); });
      } else {
        contributed(k, c);
      }
    } else {
      got_one(m.to);
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
  // Whole elements: shard k of the tensor's elements, piece c of the shard.
  Bytes size(std::uint32_t k, std::uint32_t c) const {
    return Bytes{piece(piece(elements_, servers_, k), chunks_, c).count * element_};
  }
  void contributed(std::uint32_t k, std::uint32_t c) {
    if (++contributions_[std::size_t{k} * chunks_ + c] < workers_) return;
    // Server k starts its pulls at worker k (likewise staggered, so that the servers' first
    // pulls go to different workers).
    for (std::uint32_t j = 0; j < workers_; ++j) {
      const std::uint32_t w = (j + k) % workers_;
      if (w == server(k)) {
        got_one(w);
      } else {
        send(server(k), w, tag(kPull, k, c), size(k, c));
      }
    }
  }
  void got_one(std::uint32_t worker) {
    if (--workers_state_[worker].pulls_left == 0)
      participant_event(worker, ParticipantEvent::kHolds);
    if (++pulled_ == needed_) finished();
  }

  const std::uint32_t servers_, workers_, first_server_;
  const bool spread_;
  const std::uint32_t chunks_;
  const std::int64_t element_;
  const Bytes elements_;         // the tensor in elements (bytes when element_ is 1)
  const Bandwidth aggregation_;  // 0: summing is free
  struct WorkerState {
    std::uint32_t pushes_left, pulls_left;  // not delivered yet
    bool joined;
  };
  std::vector<Time> busy_until_;  // per server: when it has summed what it received so far
  std::vector<std::uint32_t> contributions_;  // workers' pieces reduced, per (shard, piece)
  std::vector<WorkerState> workers_state_;
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
