#pragma once
// Two-level in-network aggregation (ATP's hierarchy, docs/cluster.md "Two-level aggregation" and
// docs/ina.md "Two-level aggregation"), the one implementation that both the cluster model's
// fabric (ina_fabric.hpp) and the ina model's own network data path (ina_cluster.hpp) run:
//
//   - JobLevels: where a job aggregates. Its root switch, and every other ToR that holds workers
//     of the job (a rack level), each with the bitmap of its rack's workers.
//   - LevelPorts: one switch of that hierarchy as its policies see it (SwitchPorts). A rack's
//     switch completes an aggregator when its rack's workers are in (full_of), and sends
//     everything bound for the PS (its rack's complete partial, a partial it flushes or evicts,
//     a gradient it could not aggregate, a retransmission) up to the root instead [inferred],
//     which aggregates a partial as it aggregates a gradient (the bitmap names the workers it
//     carries) and may still aggregate what a rack could not. The root sends to the PS; the
//     PS's result releases the root's aggregator and goes down once to each rack's switch,
//     which releases its own and multicasts to its rack's workers.
// Where the root is and how bytes move is the owner's (the hooks below): the fabric's root is
// the job's first worker's ToR (its PS's), the ina model's its `system.switch_node` or, with
// `system.levels: "two_level_ps_tor"`, its PS's ToR. A switch may be one job's root and another's
// rack: LevelPorts decides per job.
#include <cstdint>
#include <map>
#include <vector>

#include "models/ina/counters.hpp"
#include "models/ina/packet.hpp"
#include "models/ina/policy.hpp"
#include "sim_core/network/host_access_links.hpp"
#include "sim_core/network/topology.hpp"

namespace mlsim::ina {

// The ToR (access switch) of a host: the far end of its one link to the network.
inline NodeId tor_of(const Topology& topology, NodeId host) {
  return topology.link(host_access_links(topology, host, "an INA worker").up).dst;
}

// A job's aggregation hierarchy: `root` and, per worker (placement order), its ToR.
struct JobLevels {
  NodeId root = 0;
  std::vector<NodeId> tor;                      // per worker
  std::map<NodeId, std::uint32_t> rack_bitmap;  // per ToR: its workers
  std::vector<NodeId> lower;                    // the ToRs other than the root, in worker order

  JobLevels() = default;
  JobLevels(NodeId root_switch, const std::vector<NodeId>& worker_tors) : root(root_switch) {
    for (std::size_t w = 0; w < worker_tors.size(); ++w) {
      const NodeId t = worker_tors[w];
      tor.push_back(t);
      if (!rack_bitmap.count(t) && t != root) lower.push_back(t);
      rack_bitmap[t] |= 1u << w;
    }
  }
  // Some workers sit under another ToR than the root: two levels. Else one switch.
  bool two_level() const { return !lower.empty(); }
  // The switch worker w's gradients go to first.
  NodeId first_switch(std::size_t w) const { return two_level() ? tor.at(w) : root; }
};

// PS-bound bytes that are not the switch's own complete aggregate (fallback gradients, flushed
// and evicted partials, retransmissions): the `ps_fallback_bytes` counter.
inline void count_ps_fallback(InaCounters& c, const Packet& p, int workers,
                              std::int64_t packet_bytes) {
  const bool complete_aggregate =
      p.kind == PacketKind::kPartial && p.bitmap == full_bitmap(workers);
  if (!complete_aggregate)
    c.ps_fallback_bytes +=
        static_cast<std::uint64_t>(p.packets) * static_cast<std::uint64_t>(packet_bytes);
}

class LevelPorts : public SwitchPorts {
 public:
  explicit LevelPorts(NodeId node) : node_(node) {}
  NodeId node() const { return node_; }

  std::uint32_t full_of(std::uint16_t job) const final {
    const JobLevels* l = levels_of(job);
    if (l && node_ != l->root) return l->rack_bitmap.at(node_);
    return full_bitmap(workers_of(job));
  }
  void to_ps(const Packet& p) final {
    const JobLevels* l = levels_of(p.job);
    if (l && node_ != l->root) {
      counters().upward_packets += p.packets;
      to_switch(l->root, p, /*down=*/false);
      return;
    }
    count_ps_fallback(counters(), p, workers_of(p.job), packet_bytes_of(p.job));
    to_ps_host(p);
  }
  // A result goes to the workers under this switch and, from the root of a two-level job, one
  // copy down to each rack's switch.
  void multicast(const Packet& p) final {
    const JobLevels* l = levels_of(p.job);
    const int workers = workers_of(p.job);
    for (int w = 0; w < workers; ++w)
      if (!l || l->tor[static_cast<std::size_t>(w)] == node_)
        to_worker_host(p, static_cast<std::uint16_t>(w));
    if (l && node_ == l->root)
      for (const NodeId rack : l->lower) to_switch(rack, p, /*down=*/true);
  }
  // What the root sends one worker under another rack (a PS's re-answer to its retransmission,
  // DSA's resend request) goes down through that rack's switch, as the results do, so that it
  // cannot overtake the result it follows.
  void to_worker(const Packet& p, std::uint16_t w) final {
    const JobLevels* l = levels_of(p.job);
    if (l && node_ == l->root && l->tor.at(w) != node_) {
      to_switch(l->tor[w], p, /*down=*/true);
      return;
    }
    to_worker_host(p, w);
  }

 protected:
  // The job's hierarchy when it aggregates at two levels; null: at one switch (this one).
  virtual const JobLevels* levels_of(std::uint16_t job) const = 0;
  // Wire bytes of one of the job's packets.
  virtual std::int64_t packet_bytes_of(std::uint16_t job) const = 0;
  // To another switch of the job's hierarchy: up to the root, or down to a rack's switch.
  virtual void to_switch(NodeId sw, const Packet& p, bool down) = 0;
  // From the root (or the one switch) to the job's PS.
  virtual void to_ps_host(const Packet& p) = 0;
  // From this switch to worker `w`'s host.
  virtual void to_worker_host(const Packet& p, std::uint16_t w) = 0;

 private:
  NodeId node_;
};

}  // namespace mlsim::ina
