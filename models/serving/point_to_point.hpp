#pragma once
// Point-to-point transfers of the serving system: a pipeline stage's activations to the next
// stage, a request's KV cache from its prefill replica to its decode replica. Each is one
// send_recv of the collective layer (sim_core/collectives):
//  - between GPUs of one host: the collective layer's closed form (collective_cost: launch, the
//    protocol's hop latency and efficiency, bytes over the host's intra_node link, NVLink on the
//    shipped parts), as the tensor-parallel all-reduces are (tp_allreduce.hpp): the GPUs' links
//    to the NVSwitch are not shared with another replica's traffic, so there is nothing to
//    contend with;
//  - between hosts: an event-driven Collective (send_recv, direct) through the scenario's Network
//    backend, so the bytes cross the fabric's links, contend with other transfers and follow link
//    events.
// A transfer whose network path fails never completes (its receiver waits); this is counted
// (`failed()`). Elastic deployments (elastic.hpp) drop what was addressed to a failed worker and
// recover at the failure's detection.
#include <cstdint>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "sim_core/base/time.hpp"
#include "sim_core/base/units.hpp"
#include "sim_core/collectives/collective.hpp"
#include "sim_core/engine/engine.hpp"
#include "sim_core/network/network.hpp"

namespace mlsim {
class LinkConditions;
}  // namespace mlsim

namespace mlsim::serving {

// The link between two GPUs of one host (topology.hardware's intra_node entry).
struct HostLink {
  Bandwidth bandwidth;  // per GPU, per direction
  Time latency;         // one message GPU -> switch -> GPU
};

class PointToPoint {
 public:
  using Done = Engine::Callback;
  // Engine, network and links (when given) must outlive this. `links` is needed when `costs`
  // enables several protocols (the collective chooses one from the route's narrowest link).
  PointToPoint(Engine& engine, Network& network, const LinkConditions* links,
               collectives::CostModel costs);
  PointToPoint(const PointToPoint&) = delete;
  PointToPoint& operator=(const PointToPoint&) = delete;
  ~PointToPoint();

  // Sends `bytes` from host `from` to host `to`; `done` runs when the last byte arrived.
  // `host_link` is the hosts' intra_node link, used when from == to; there the bytes are split
  // over `lanes` GPU pairs sending at once over their own links (a tensor-parallel group's
  // shards), so the time is that of bytes / lanes. Across hosts all the bytes cross the network
  // between the two hosts.
  void send(NodeId from, NodeId to, Bytes bytes, const HostLink& host_link, Done done,
            int lanes = 1);

  // The closed-form time of one send within a host (what send() waits when from == to).
  Time within_host(Bytes bytes, const HostLink& link) const;

  // Payload handed over and payload delivered (equal once every transfer completed), transfers
  // started, and transfers that failed on the network (never delivered).
  std::int64_t bytes_sent() const { return bytes_sent_; }
  std::int64_t bytes_delivered() const { return bytes_delivered_; }
  std::uint64_t transfers() const { return transfers_; }
  std::uint64_t failed() const;

 private:
  struct InFlight {
    std::unique_ptr<collectives::Collective> collective;
    Done done;
    std::int64_t bytes = 0;
  };
  void on_network_done(std::uint64_t id, const collectives::CollectiveResult& result);

  Engine& engine_;
  Network& network_;
  const LinkConditions* links_;
  collectives::CostModel costs_;
  absl::flat_hash_map<std::uint64_t, InFlight> in_flight_;
  std::uint64_t next_id_ = 0;
  std::int64_t bytes_sent_ = 0, bytes_delivered_ = 0;
  std::uint64_t transfers_ = 0, failed_ = 0;
};

}  // namespace mlsim::serving
