#pragma once
// Picks the replica of a deployment that receives a new request.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "models/serving/load_index.hpp"
#include "models/serving/replica.hpp"

namespace mlsim::serving {

class Router {
 public:
  virtual ~Router() = default;
  virtual std::string_view name() const = 0;
  // The replicas to route to, in order (ties go to the earlier one); non-empty. Called before
  // the first pick and again whenever the set changes (an elastic deployment's live replicas).
  virtual void assign(std::span<Replica* const> replicas) = 0;
  // All the assigned replicas serve the request's tier.
  virtual Replica& pick(const Request& r) = 0;
};

class RoundRobinRouter final : public Router {
 public:
  std::string_view name() const override { return "round_robin"; }
  void assign(std::span<Replica* const> replicas) override {
    replicas_.assign(replicas.begin(), replicas.end());
  }
  Replica& pick(const Request&) override { return *replicas_[next_++ % replicas_.size()]; }

 private:
  std::vector<Replica*> replicas_;
  std::size_t next_ = 0;
};

// The replica with the fewest prefill and output tokens still to process; ties go to the first.
// O(log n) per arrival through the load index (load_index.hpp), which picks what a scan over the
// replicas in order with a strict < would.
class LeastOutstandingTokensRouter final : public Router {
 public:
  std::string_view name() const override { return "least_outstanding_tokens"; }
  void assign(std::span<Replica* const> replicas) override { index_.assign(replicas); }
  Replica& pick(const Request&) override { return index_.least_loaded(); }

 private:
  ReplicaLoadIndex index_;
};

// Cache-aware routing (Mooncake's Conductor, SGLang's cache-aware router, simplified): the
// replica whose prefix cache holds the longest prefix of the request's prompt; ties (and every
// request when prefix caching is off) go to the fewest outstanding tokens, then to the first.
// Load is not traded against hits: a replica holding a prefix receives its follow-ups however
// loaded it is. With prefix caching off every hit is 0 and the load index answers in O(log n);
// with it on, every replica's cache is asked (O(replicas) per arrival: no index of which
// replica caches which block).
class PrefixAffinityRouter final : public Router {
 public:
  std::string_view name() const override { return "prefix_affinity"; }
  void assign(std::span<Replica* const> replicas) override {
    index_.assign(replicas);
    caching_ = replicas.front()->state().prefix_cache() != nullptr;
  }
  Replica& pick(const Request& req) override {
    if (!caching_) return index_.least_loaded();
    Replica* best = nullptr;
    std::int64_t best_hit = -1, best_load = 0;
    for (Replica* r : index_.replicas()) {
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

 private:
  ReplicaLoadIndex index_;
  bool caching_ = false;
};

}  // namespace mlsim::serving
