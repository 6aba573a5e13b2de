#pragma once
// A job's parameter server in ATP and DSA: it completes every chunk the switch could not
// (collisions, evictions, retransmissions), receives every aggregate the switch completed, and
// sends each chunk's result back through the switch exactly once (which releases the chunk's
// aggregator and multicasts the result to the workers).
//
// Merging is by bitmap: a gradient whose worker is already counted is a duplicate and dropped; a
// partial overlapping what the PS holds would double-count, which the protocol rules out, so it
// is an InvariantError.
//
// Selective retransmission (DSA) [inferred from the abstract's "optimized selective
// retransmission under preemption"]: when an evicted partial arrives and the chunk is still
// incomplete, the PS asks exactly the workers whose bits are missing to resend their fragment
// straight to it, instead of waiting for every worker's timeout.
//
// Lossy links: a worker whose result was lost retransmits a chunk the PS has finished. With
// `answer_late_resends` the PS sends that worker the kept result again (unicast, marked resend),
// as ATP's PS answers retransmissions. [inferred] On lossless links (the default) a finished
// chunk's result is certain to arrive, so the PS drops late retransmissions instead of adding
// redundant traffic; this keeps lossless runs as they were before loss was modelled.
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "models/ina/counters.hpp"
#include "models/ina/packet.hpp"
#include "sim_core/engine/inline_function.hpp"

namespace mlsim::ina {

class ParameterServer {
 public:
  using Send = InlineFunction<void(const Packet&), 16>;
  // `send` carries results and resend requests from the PS into the network.
  ParameterServer(std::uint16_t job, int workers, bool selective_retransmission,
                  bool answer_late_resends, Send send, InaCounters& counters);

  void on_packet(const Packet& p);
  std::size_t open_chunks() const { return open_.size(); }

 private:
  struct Open {
    std::uint64_t sum = 0;
    std::uint32_t bitmap = 0;
    std::uint32_t requested = 0;  // workers asked to resend
    std::uint16_t packets = 1;
    bool ecn = false;
  };
  bool finished(std::uint64_t seq) const { return seq < done_.size() && done_[seq]; }
  void complete(std::uint64_t seq, const Open& o);

  std::uint16_t job_;
  int workers_;
  std::uint32_t full_;
  bool selective_;
  bool answer_late_;
  Send send_;
  InaCounters& counters_;
  std::unordered_map<std::uint64_t, Open> open_;
  std::vector<bool> done_;  // by seq
  // The sum each finished chunk's result carried, by seq (only kept to answer late resends).
  std::vector<std::uint64_t> result_sum_;
};

}  // namespace mlsim::ina
