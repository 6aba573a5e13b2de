#pragma once
// DSA (Wang et al., ICNP 2023; papers.md section 2): ATP plus preemption in the data plane.
// A packet whose aggregator is held by a chunk of strictly lower priority evicts it: the partial
// sum and bitmap go to the owner's PS (nothing is lost) and the aggregator is re-claimed for the
// incoming chunk. Equal or lower priority falls back to the PS as in ATP.
// [inferred] An aggregator that is complete and only waiting for its PS result may also be
//   preempted (its aggregate is already at the PS, so nothing is sent); DSA's abstract says
//   preemption "stops aggregators idling", which this reading makes literal.
// [inferred] Priorities are strict; ties (same job, or jobs of equal intensity) never preempt, so
//   preemption cannot ping-pong between two chunks.
// The PS side (completing the evicted chunk, selective retransmission) is in
// parameter_server.hpp; the control-plane priority in priority.hpp.
#include "models/ina/atp_policy.hpp"

namespace mlsim::ina {

class DsaPolicy : public AtpPolicy {
 public:
  using AtpPolicy::AtpPolicy;
  std::string_view name() const override { return "dsa"; }

 protected:
  void on_collision(std::size_t index, const Packet& p) override {
    if (p.priority > pool_.at(index).priority) {
      ++ports_.counters().preemptions;
      flush(index, /*evicted=*/true);
      claim_and_add(index, p);
    } else {
      fall_back(p);
    }
  }
};

}  // namespace mlsim::ina
