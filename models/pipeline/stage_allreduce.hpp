#pragma once
// The all-reduce of one replicated stage's weight gradients among the replicas that take part in
// a round (PipeDream's hybrid: after each round of backwards), by the training core's ring
// strategy (models/training/all_reduce_sync.hpp) behind a gradient path with the FIFO scheduler.
// The replicas are this GradientOwner's workers and the stage's parameters its one layer (bytes as
// values of one byte); a round is every member contributing, its end every member holding the
// sum, then `release` runs. The ring is rearmed round after round (no allocation per round).
#include <functional>
#include <memory>
#include <vector>

#include "models/training/gradient_owner.hpp"
#include "models/training/gradient_path.hpp"
#include "models/training/gradient_sync.hpp"
#include "sim_core/collectives/costs.hpp"
#include "sim_core/network/link_conditions.hpp"

namespace mlsim::pipeline {

class StageAllReduce final : public training::GradientOwner {
 public:
  // `members` (2 or more hosts) all-reduce `bytes` (> 0) per round with the collective layer's
  // `costs` and `host` costs; `links` must outlive this when several protocols are enabled.
  StageAllReduce(Engine& engine, Network& network, std::vector<NodeId> members, std::int64_t bytes,
                 const collectives::CostModel& costs, const collectives::HostCosts& host,
                 const LinkConditions* links, std::function<void()> release);

  // Member `member` (an index into `members`) finished its backward of this round.
  void contribute(std::size_t member) { path_.gradient_ready(member, 0); }
  std::uint64_t rounds() const { return rounds_; }
  std::uint64_t failed_transfers() const { return ring_->failed_transfers(); }

  std::size_t gradient_workers() const override { return members_; }
  std::size_t gradient_layers() const override { return 1; }
  std::int64_t layer_parameters(std::size_t) const override { return bytes_; }
  void parameters_back(std::size_t worker, std::size_t layer) override;
  void parameters_fetched(std::size_t, std::size_t) override;
  void check_progress() override {}
  std::size_t updates(std::size_t, std::size_t) const override { return rounds_; }

 private:
  std::size_t members_;
  std::int64_t bytes_;
  std::function<void()> release_;
  training::GradientPath path_;
  std::unique_ptr<training::GradientSync> ring_;
  std::size_t back_ = 0;  // members holding this round's sum
  std::uint64_t rounds_ = 0;
};

}  // namespace mlsim::pipeline
