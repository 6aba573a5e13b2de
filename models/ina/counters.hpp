#pragma once
// Event counts of one run, kept by the switch policies, parameter servers and workers. All
// packet counts are wire packets (a burst of k counts k).
#include <cstdint>

namespace mlsim::ina {

struct InaCounters {
  // Workers.
  std::uint64_t gradient_packets = 0;       // first transmissions
  std::uint64_t retransmitted_packets = 0;  // timeouts and answers to resend requests
  std::uint64_t timeouts = 0;
  std::uint64_t results_received = 0;   // result bursts taken by workers
  std::uint64_t duplicate_results = 0;  // a result for a chunk the worker already had (a bug)
  std::uint64_t late_results = 0;  // a re-answer to a retransmission the worker no longer needed
  std::uint64_t wrong_sums = 0;    // a result whose sum is not every worker exactly once
  std::int64_t elements_delivered = 0;  // gradient values received by workers, all workers
  // Switch.
  std::uint64_t aggregated_packets = 0;  // added into an aggregator
  std::uint64_t collision_packets = 0;   // found their aggregator owned by another chunk
  std::uint64_t fallback_packets = 0;    // gradients forwarded to the PS unaggregated
  std::uint64_t preemptions = 0;         // DSA evictions
  // SwitchML: retransmissions reaching the switch after their job ended (dropped).
  std::uint64_t late_retransmissions = 0;
  std::uint64_t evicted_partial_packets = 0;
  std::uint64_t flushed_partial_packets = 0;  // partials pushed to the PS by a retransmission
  // Two-level aggregation (cluster fabric): whatever a rack's switch sends up to the job's root
  // switch (complete rack partials, flushed or evicted ones, gradients it could not aggregate,
  // retransmissions). At the rack's switch, fallback_packets and collision_packets count its
  // own collisions too.
  std::uint64_t upward_packets = 0;
  // Parameter servers.
  std::uint64_t ps_packets_in = 0;      // every packet a PS received
  std::uint64_t ps_fallback_bytes = 0;  // bytes of fallback gradients, partials and resends
  std::uint64_t ps_late_duplicates = 0;
  std::uint64_t resend_requests = 0;   // selective retransmission requests sent (per worker)
  std::uint64_t result_reanswers = 0;  // results a PS sent again for a resent, finished chunk
  // Links.
  std::uint64_t lost_packets = 0;  // wire packets dropped by the loss model
  // Aborted jobs (stall watchdog): wire packets that reached the switch or a host afterwards.
  std::uint64_t packets_after_abort = 0;
};

}  // namespace mlsim::ina
