#pragma once
// Packet loss on the host <-> switch links, so that the policies' recovery paths (SwitchML's
// shadow copies and timeouts, ATP's and DSA's timeout retransmission through the PS) run.
//
// Every wire packet is lost independently with probability `rate` on each hop it takes (worker
// or PS -> switch, switch -> worker or PS), drawn from the named stream "ina.loss" so that a run
// is reproducible from the scenario seed and loss draws never shift other components' draws.
// A lost packet still occupies its link (it is dropped at the far end: corruption or a full
// receive buffer). [inferred] In batched mode a burst of k packets is one unit: it is lost with
// probability 1 - (1 - rate)^k and then resent whole, as if the lost packet took the rest of the
// burst with it (bursts are short next to a timeout, so this only shifts which packets resend).
//
// Tests pick the lost packets by hand through `Rule` instead of at random.
#include <cmath>
#include <cstdint>
#include <functional>

#include "models/ina/packet.hpp"
#include "sim_core/engine/random.hpp"

namespace mlsim::ina {

enum class Hop : std::uint8_t { kWorkerToSwitch, kSwitchToWorker, kPsToSwitch, kSwitchToPs };

class PacketLoss {
 public:
  // Returns true for a packet to drop. `to` is the receiving worker on kSwitchToWorker hops.
  using Rule = std::function<bool(Hop, const Packet&, std::uint16_t to)>;

  PacketLoss(double rate, std::uint64_t seed, Rule rule)
      : rate_(rate), rng_(seed, "ina.loss"), rule_(std::move(rule)) {}

  bool enabled() const { return rate_ > 0 || rule_ != nullptr; }

  bool lost(Hop hop, const Packet& p, std::uint16_t to) {
    if (rule_) return rule_(hop, p, to);
    if (rate_ <= 0) return false;
    const double survive = std::pow(1.0 - rate_, p.packets);
    return rng_.uniform() >= survive;
  }

 private:
  double rate_;
  RandomStream rng_;
  Rule rule_;
};

}  // namespace mlsim::ina
