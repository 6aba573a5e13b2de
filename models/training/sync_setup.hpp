#pragma once
// What a synchronisation strategy is built with (policies.hpp registers the factories).
#include <cstdint>
#include <vector>

#include "models/training/gradient_sync.hpp"
#include "sim_core/collectives/costs.hpp"
#include "sim_core/engine/engine.hpp"
#include "sim_core/hardware/node_hardware.hpp"
#include "sim_core/network/link_conditions.hpp"
#include "sim_core/network/network.hpp"

namespace mlsim::training {

struct SyncOptions {
  std::vector<NodeId> workers;
  std::vector<NodeId> servers;                 // parameter servers (ps only)
  std::vector<std::int64_t> layer_parameters;  // gradient values per layer, forward order
  std::int64_t bytes_per_parameter = 4;
  // Per message: host.message_overhead is the sending host's CPU time, one message after
  // another on one communication thread per host (shared by all the job's collectives);
  // host.message_latency a delay that overlaps other messages; host.ps_aggregation the servers'
  // summing rate (0 = free). host.send_clock is set by the strategy.
  collectives::HostCosts host;
  // The collectives' NCCL-like costs (launch, protocols; none by default). Several protocols
  // need `links` (chosen per collective from the route between the participants), which must
  // then outlive the strategy.
  collectives::CostModel costs;
  // Messages in flight per participant of each collective (0 = no limit, the default: a job's
  // many chunks are paced by the scheduler's credit instead).
  int window = 0;
  const LinkConditions* links = nullptr;
  // Mixed into the ECMP label of every transfer of the strategy's collectives
  // (CollectiveSpec::flow_label); 0 by default. A Megatron job on the core gives each stage's
  // DP ring the execution graph's label for that group (megatron_core_job.hpp).
  std::uint64_t flow_label = 0;
  // ps: a message above this many values is sliced evenly over all servers, otherwise it goes
  // whole to server (key mod servers), keys numbered over (layer, chunk) [MXNet kvstore_dist:
  // MXNET_KVSTORE_BIGARRAY_BOUND, memory, unverified].
  std::int64_t bigarray_bound = 1'000'000;
  // ps: a chunk's credit is held until its pull is back (else until its push arrived).
  bool credit_until_pull = false;
  // ps: each worker's pushes to one server leave one after another, in the order the worker
  // started them, a push's bytes after the previous one's arrived (ps-lite: one ZMQ_DEALER
  // socket, so one TCP byte stream, per destination node; ZMQVan::SendMsg only queues a
  // message's parts on it, so messages to one server pipeline in order and messages to
  // different servers go in parallel [code: dmlc/ps-lite src/zmq_van.h ZMQVan::Connect,
  // ZMQVan::SendMsg; include/ps/kv_app.h KVWorker::Send, one message per server slice]). A
  // chunk sliced over every server is then one message per server, each in its server's
  // queue. false: every push leaves at once and a worker's pushes share its link (the model
  // before 2026-12-07).
  bool in_order_connections = false;
  // ring_closed_form, reduce_scatter_all_gather_closed_form: GPUs of a worker's host that each
  // run the same collective at once over the host's link, whose bandwidth the closed form splits
  // evenly among them (a Megatron worker's TP group, sim_core/collectives/inter_host.hpp).
  int host_link_sharers = 1;
  // ring_closed_form, reduce_scatter_all_gather_closed_form: when set (it must then outlive the
  // strategy), workers all on one host synchronise in closed form over that host's intra_node
  // link (sim_core/collectives/intra_host.hpp), as the execution graph prices a group inside one
  // host (a Megatron stage's DP group when several TP groups share a host).
  const NodeHardware* hardware = nullptr;
};

struct SyncSetup {
  Engine& engine;
  Network& network;
  SyncEvents& events;
  SyncOptions options;
};

}  // namespace mlsim::training
