#pragma once
// Picks the replica of a deployment that receives a new request.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "models/serving/replica.hpp"

namespace mlsim::serving {

class Router {
 public:
  virtual ~Router() = default;
  virtual std::string_view name() const = 0;
  // `replicas` is non-empty; all of them serve the request's tier.
  virtual Replica& pick(std::span<Replica* const> replicas) = 0;
};

class RoundRobinRouter final : public Router {
 public:
  std::string_view name() const override { return "round_robin"; }
  Replica& pick(std::span<Replica* const> replicas) override {
    return *replicas[next_++ % replicas.size()];
  }

 private:
  std::size_t next_ = 0;
};

// The replica with the fewest prefill and output tokens still to process; ties go to the first.
class LeastOutstandingTokensRouter final : public Router {
 public:
  std::string_view name() const override { return "least_outstanding_tokens"; }
  Replica& pick(std::span<Replica* const> replicas) override {
    Replica* best = replicas.front();
    auto best_load = best->outstanding_tokens();
    for (Replica* r : replicas.subspan(1)) {
      const auto load = r->outstanding_tokens();
      if (load < best_load) {
        best = r;
        best_load = load;
      }
    }
    return *best;
  }
};

}  // namespace mlsim::serving
