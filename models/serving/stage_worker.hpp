#pragma once
// One pipeline-stage worker: a tensor-parallel group on one host running a range of layers, with
// a FIFO of micro-batches. A pipeline-parallel replica owns one per stage (replica.hpp); an
// elastic deployment (elastic.hpp) shares them: a worker of stage s takes the micro-batches of
// every front replica whose virtual engines are routed through it, MultiWorld's stage replicas.
//
// A micro-batch is identified by the replica and virtual engine it belongs to and the engine's
// epoch when it was queued: when a failure resets the virtual engine (its KV is lost), its
// micro-batches still queued or running anywhere are stale and dropped when they come up.
// `epoch` of the worker itself counts its failures: work running on it and transfers addressed
// to it when it fails are lost.
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "sim_core/base/node_id.hpp"
#include "sim_core/base/time.hpp"

namespace mlsim::serving {

class Replica;
class IterationCostModel;

struct StageJob {
  Replica* replica = nullptr;
  std::uint32_t engine = 0;
  std::uint32_t epoch = 0;  // the virtual engine's epoch when queued
};

struct StageWorker {
  std::string name;
  int stage = 0;  // position in the pipeline
  int index = 0;  // among its stage's workers (an elastic deployment's)
  std::int32_t first_layer = 0, last_layer = 0;
  std::vector<NodeId> hosts;    // the distinct hosts of its GPUs (lock-step on each)
  std::vector<double> nominal;  // the current micro-batch's GPU seconds per host (scratch)
  // Prices of its GPU when it differs from the replica's (an elastic stage on its own GPU type);
  // null: the replica's cost model.
  const IterationCostModel* cost = nullptr;
  std::deque<StageJob> queue;
  bool busy = false;
  StageJob current;
  Time allreduce;  // the current micro-batch's all-reduces (and MoE all-to-alls, all-gathers)
  Time started;
  double busy_s = 0;
  bool alive = true;
  std::uint32_t epoch = 0;
  // MultiWorld's host-side polling (elastic.hpp, `poll_step`): the operations this worker's event
  // loop polls besides the one it waits for. posted_recvs: one receive per world with a live
  // upstream neighbour (set by the elastic deployment); sends: its activation sends in flight
  // (counted in the epoch they were posted in: a failure forgets them).
  int posted_recvs = 0;
  int sends_in_flight = 0;
  std::uint32_t sends_epoch = 0;
  int sends() const { return sends_epoch == epoch ? sends_in_flight : 0; }
};

}  // namespace mlsim::serving
