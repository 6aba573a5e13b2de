#include "models/pipeline/pipeline_costs.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <numeric>

#include "sim_core/base/error.hpp"

namespace mlsim::pipeline {

std::vector<LayerCost> layer_costs(const DnnProfile& profile) {
  std::vector<LayerCost> out;
  // Position of each profile node among the non-input layers (none for an input).
  constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  std::vector<std::size_t> position(profile.layers.size(), kNone);
  for (std::size_t k = 0; k < profile.layers.size(); ++k) {
    const LayerProfile& l = profile.layers[k];
    if (l.is_input) continue;
    position[k] = out.size();
    out.push_back({l.forward_ms / 1e3, l.backward_ms / 1e3, static_cast<double>(l.activation.count),
                   static_cast<double>(l.parameters.count), std::nullopt});
  }
  // Each layer's last consumer; its output crosses every cut after it and before that consumer.
  std::vector<std::size_t> last_consumer(out.size(), kNone);
  for (const auto& [from, to] : profile.edges) {
    const std::size_t a = position[from], b = position[to];
    if (a == kNone || b == kNone) continue;
    MLSIM_CHECK(a < b, "profile edges against the layers' topological order");
    last_consumer[a] = last_consumer[a] == kNone ? b : std::max(last_consumer[a], b);
  }
  // The cut after layer i carries the output of every layer k <= i whose last consumer comes
  // after i. Summed afresh at every cut in layer order (no running total with subtractions), so
  // a chain's cut is exactly its layer's activation, bit for bit.
  for (std::size_t i = 0; i < out.size(); ++i) {
    double bytes = 0;
    for (std::size_t k = 0; k <= i; ++k)
      if (last_consumer[k] != kNone && last_consumer[k] > i) bytes += out[k].activation_bytes;
    out[i].boundary_bytes = bytes;
  }
  return out;
}

StageHost profiled_host(const std::vector<LayerCost>& layers, double speed) {
  StageHost h;
  for (const LayerCost& l : layers) {
    h.forward_s.push_back(l.forward_s);
    h.backward_s.push_back(l.backward_s);
  }
  h.speed = speed;
  return h;
}

double Conditions::bandwidth_between(std::size_t a, std::size_t b) const {
  if (routed()) return routes.bandwidth[a * routes.hosts + b];
  return std::min(bandwidth[a], bandwidth[b]);
}

std::vector<double> transfer_bandwidths(const std::vector<std::size_t>& first_host,
                                        const Conditions& c) {
  const std::size_t H = c.host_count();
  std::vector<double> out(H * H);
  for (std::size_t a = 0; a < H; ++a)
    for (std::size_t b = 0; b < H; ++b) out[a * H + b] = a == b ? 0 : c.bandwidth_between(a, b);
  if (!c.routed()) return out;
  MLSIM_CHECK(c.routes.hosts == H, "routes for other hosts");
  // The pairs that exchange minibatches: across boundary s, minibatch m goes from replica
  // m mod r_s to replica m mod r_{s+1} (and its gradient back), over a whole round of lcm(r_s,
  // r_{s+1}) minibatches.
  std::vector<std::uint8_t> used(H * H, 0);
  for (std::size_t s = 0; s + 2 < first_host.size(); ++s) {
    const std::size_t r0 = first_host[s + 1] - first_host[s];
    const std::size_t r1 = first_host[s + 2] - first_host[s + 1];
    for (std::size_t m = 0; m < std::lcm(r0, r1); ++m) {
      const std::size_t x = first_host[s] + m % r0, y = first_host[s + 1] + m % r1;
      used[x * H + y] = used[y * H + x] = 1;
    }
  }
  // Senders per shared link.
  std::vector<std::vector<std::uint8_t>> sends(c.routes.shared_bandwidth.size(),
                                               std::vector<std::uint8_t>(H, 0));
  for (std::size_t a = 0; a < H; ++a)
    for (std::size_t b = 0; b < H; ++b)
      if (used[a * H + b])
        for (std::size_t l : c.routes.shared[a * H + b]) sends[l][a] = 1;
  for (std::size_t a = 0; a < H; ++a)
    for (std::size_t b = 0; b < H; ++b) {
      if (!used[a * H + b]) continue;
      for (std::size_t l : c.routes.shared[a * H + b]) {
        const auto senders = static_cast<double>(std::count(sends[l].begin(), sends[l].end(), 1));
        out[a * H + b] = std::min(out[a * H + b], c.routes.shared_bandwidth[l] / senders);
      }
    }
  return out;
}

std::size_t Partition::first_host(std::size_t stage) const {
  std::size_t h = 0;
  for (std::size_t s = 0; s < stage; ++s) h += replication(s);
  return h;
}

std::size_t Partition::stage_of_host(std::size_t host) const {
  std::size_t h = 0;
  for (std::size_t s = 0; s < stages(); ++s) {
    h += replication(s);
    if (host < h) return s;
  }
  return stages();
}

bool Partition::operator==(const Partition& o) const {
  if (first != o.first) return false;
  for (std::size_t s = 0; s < stages(); ++s)
    if (replication(s) != o.replication(s)) return false;
  return true;
}

StageCosts stage_costs(const std::vector<LayerCost>& layers, const Partition& p,
                       const Conditions& c) {
  MLSIM_CHECK(p.stages() >= 1 && p.first.back() == layers.size() &&
                  (p.replicas.empty() || p.replicas.size() == p.stages()) &&
                  p.hosts_used() <= c.host_count(),
              "partition does not match the layers and hosts");
  StageCosts s;
  for (std::size_t st = 0; st < p.stages(); ++st) {
    MLSIM_CHECK(p.replication(st) >= 1 && p.first[st] < p.first[st + 1],
                "a stage without a host or a layer");
    s.first_host.push_back(p.first_host(st));
    for (std::size_t h = s.first_host.back(); h < s.first_host.back() + p.replication(st); ++h) {
      const StageHost& host = c.hosts[h];
      MLSIM_CHECK(host.forward_s.size() == layers.size() && host.backward_s.size() == layers.size(),
                  "a host without a time for every layer");
      double f = 0, b = 0;
      for (std::size_t l = p.first[st]; l < p.first[st + 1]; ++l) {
        f += host.forward_s[l];
        b += host.backward_s[l];
      }
      s.forward_s.push_back(f / host.speed);
      s.backward_s.push_back(b / host.speed);
    }
    double params = 0;
    for (std::size_t l = p.first[st]; l < p.first[st + 1]; ++l) params += layers[l].parameter_bytes;
    s.parameter_bytes.push_back(params);
    if (st + 1 < p.stages()) s.boundary_bytes.push_back(layers[p.first[st + 1] - 1].cut_bytes());
  }
  s.first_host.push_back(p.hosts_used());
  return s;
}

std::vector<LayerMove> layer_moves(const std::vector<LayerCost>& layers, const Partition& from,
                                   const Partition& to) {
  // Stage owning each layer in `from`.
  std::vector<std::size_t> old_stage(layers.size());
  for (std::size_t s = 0; s < from.stages(); ++s)
    for (std::size_t l = from.first[s]; l < from.first[s + 1]; ++l) old_stage[l] = s;
  std::vector<LayerMove> out;
  for (std::size_t s = 0; s < to.stages(); ++s) {
    for (std::size_t i = 0; i < to.replication(s); ++i) {
      const std::size_t host = to.first_host(s) + i;
      const std::size_t held = from.stage_of_host(host);  // from.stages() if it held nothing
      for (std::size_t l = to.first[s]; l < to.first[s + 1]; ++l) {
        if (old_stage[l] == held) continue;
        const std::size_t source =
            from.first_host(old_stage[l]) + i % from.replication(old_stage[l]);
        out.push_back({source, host, l, layers[l].parameter_bytes});
      }
    }
  }
  return out;
}

std::vector<Migration> migrations(const std::vector<LayerCost>& layers, const Partition& from,
                                  const Partition& to) {
  std::map<std::pair<std::size_t, std::size_t>, double> bytes;
  for (const LayerMove& m : layer_moves(layers, from, to))
    bytes[{m.from_host, m.to_host}] += m.parameter_bytes;
  std::vector<Migration> out;
  for (const auto& [pair, b] : bytes) out.push_back({pair.first, pair.second, b});
  return out;
}

double moved_parameter_bytes(const std::vector<LayerCost>& layers, const Partition& from,
                             const Partition& to) {
  double moved = 0;
  for (const Migration& m : migrations(layers, from, to)) moved += m.parameter_bytes;
  return moved;
}

}  // namespace mlsim::pipeline
