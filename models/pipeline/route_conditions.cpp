#include "models/pipeline/route_conditions.hpp"

#include <algorithm>
#include <limits>
#include <map>

#include "sim_core/network/host_access_links.hpp"
#include "sim_core/network/routing.hpp"

namespace mlsim::pipeline {

HostRoutes host_routes(const LinkConditions& links, std::span<const NodeId> hosts) {
  const std::size_t H = hosts.size();
  std::vector<LinkId> access;
  for (NodeId h : hosts) {
    const AccessLinks a = host_access_links(links.topology(), h, "a pipeline host");
    access.push_back(a.up);
    access.push_back(a.down);
  }
  HostRoutes out;
  Conditions::Routes& r = out.routes;
  r.bandwidth.assign(H * H, 0);
  r.latency.assign(H * H, 0);
  r.shared.assign(H * H, {});
  std::map<LinkId, std::size_t> shared;  // link -> index into shared_bandwidth
  Router& router = links.router();
  for (std::size_t a = 0; a < H; ++a)
    for (std::size_t b = 0; b < H; ++b) {
      if (a == b) continue;
      const auto path = router.route(hosts[a], hosts[b], 0);
      if (!path) return {};
      double narrowest = std::numeric_limits<double>::infinity(), latency = 0;
      for (LinkId l : path->links) {
        narrowest = std::min(narrowest, links.usable(l).bytes_per_s);
        latency += links.latency(l).seconds();
        out.links.push_back(l);
        if (std::find(access.begin(), access.end(), l) != access.end()) continue;
        const auto [it, added] = shared.emplace(l, r.shared_bandwidth.size());
        if (added) r.shared_bandwidth.push_back(links.usable(l).bytes_per_s);
        r.shared[a * H + b].push_back(it->second);
      }
      if (narrowest <= 0) return {};
      r.bandwidth[a * H + b] = narrowest;
      r.latency[a * H + b] = latency;
    }
  std::sort(out.links.begin(), out.links.end());
  out.links.erase(std::unique(out.links.begin(), out.links.end()), out.links.end());
  if (shared.empty()) return {};
  r.hosts = H;
  return out;
}

}  // namespace mlsim::pipeline
