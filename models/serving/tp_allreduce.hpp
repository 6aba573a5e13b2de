#pragma once
// The time of one tensor-parallel all-reduce of a replica: a ring all-reduce over its tp GPUs,
// costed by the platform's collective layer (sim_core/collectives/costs.hpp, collective_cost:
// launch, per-step latency and protocol chosen by size, bytes over the GPUs' link) with the
// bandwidth and latency of the link between the GPUs of one host (the GPU catalog's intra_node
// entry, NVSwitch on the shipped A100 and H100 parts). The bytes do not cross the scenario's
// network event by event: the GPUs of one NVSwitch node have a link each that no other replica
// uses, so the closed form is what the event-driven ring would take there
// (tests/collectives/costs_test.cpp, ClosedFormIsWhatTheEventDrivenRingTakesOnAStar).
#include "sim_core/base/time.hpp"
#include "sim_core/base/units.hpp"
#include "sim_core/collectives/costs.hpp"

namespace mlsim::serving {

struct TpAllReduce {
  collectives::CostModel costs;  // none: bytes over the link only
  Bandwidth bandwidth;           // per GPU, per direction; > 0 for tp > 1
  Time route_latency;            // one message from a GPU to the next one

  // One all-reduce of `payload` bytes over `tp` GPUs; zero at tp 1 (nothing to reduce).
  Time time(int tp, Bytes payload) const;
  // Another collective over `n` GPUs of the same host, by the collective layer's default
  // algorithm for it (all-to-all: direct; all-gather: ring), `bytes` as collective.hpp counts
  // them (all-to-all: each GPU's whole send buffer; all-gather: the gathered result); zero at n 1.
  Time collective(collectives::Operation op, int n, Bytes bytes) const;
};

}  // namespace mlsim::serving
