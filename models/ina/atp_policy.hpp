#pragma once
// ATP (Lao et al., NSDI 2021) as its P4 code behaves (papers.md section 2):
// - a chunk's aggregator is hash(job, seq) in one pool shared by all jobs;
// - a packet whose aggregator is held by another chunk falls back to the job's PS unaggregated;
// - a complete aggregate goes to the PS, and the aggregator is released only when the PS's
//   result for that chunk passes back through the switch (then multicast to the workers);
// - a retransmitted packet is never aggregated: it goes to the PS and, if the aggregator still
//   holds its chunk, pushes the partial sum and bitmap to the PS and frees the aggregator
//   [inferred: how ATP's switch treats a resend is not in papers.md; this keeps every
//   contribution in exactly one place, so nothing is counted twice].
#include "models/ina/policy.hpp"

namespace mlsim::ina {

class AtpPolicy : public AggregationPolicy {
 public:
  using AggregationPolicy::AggregationPolicy;
  std::string_view name() const override { return "atp"; }
  bool uses_parameter_server() const override { return true; }
  void on_gradient(const Packet& p) override;
  void on_result(const Packet& p) override;

  std::size_t index_of(std::uint16_t job, std::uint64_t seq) const;

 protected:
  // The aggregator is held by another chunk. ATP: the packet falls back to the PS.
  virtual void on_collision(std::size_t index, const Packet& p);
  void fall_back(const Packet& p);
  void claim_and_add(std::size_t index, const Packet& p);
  void add(std::size_t index, const Packet& p);
  // Sends the aggregator's partial (if not already complete at the PS) and frees it.
  void flush(std::size_t index, bool evicted);
};

}  // namespace mlsim::ina
