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
  virtual Replica& pick(std::span<Replica* const> replicas, const Request& r) = 0;
};

class RoundRobinRouter final : public Router {
 public:
  std::string_view name() const override { return "round_robin"; }
  Replica& pick(std::span<Replica* const> replicas, const Request&) override {
    return *replicas[next_++ % replicas.size()];
  }

 private:
  std::size_t next_ = 0;
};

// The replica with the fewest prefill and output tokens still to process; ties go to the first.
class LeastOutstandingTokensRouter final : public Router {
 public:
  std::string_view name() const override { return "least_outstanding_tokens"; }
  Replica& pick(std::span<Replica* const> replicas, const Request&) override {
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

// Cache-aware routing (Mooncake's Conductor, SGLang's cache-aware router, simplified): the
// replica whose prefix cache holds the longest prefix of the request's prompt; ties (and every
// request when prefix caching is off) go to the fewest outstanding tokens, then to the first.
// Load is not traded against hits: a replica holding a prefix receives its follow-ups however
// loaded it is.
class PrefixAffinityRouter final : public Router {
 public:
  std::string_view name() const override { return "prefix_affinity"; }
  Replica& pick(std::span<Replica* const> replicas, const Request& req) override {
    Replica* best = nullptr;
    std::int64_t best_hit = -1, best_load = 0;
    for (Replica* r : replicas) {
      const std::int64_t hit = r->cached_prefix_tokens(req.spec);
      const std::int64_t load = r->outstanding_tokens();
      if (hit > best_hit || (hit == best_hit && load < best_load)) {
        best = r;
        best_hit = hit;
        best_load = load;
      }
    }
    return *best;
  }
};

}  // namespace mlsim::serving
