#pragma once
// What travels between workers, the switch and parameter servers. One Packet stands for a burst of
// `packets` wire packets carrying consecutive chunks of one tensor (batched mode); in
// packet-accurate mode `packets` is 1.
//
// Values are not simulated; instead each worker w contributes 1 << w to `sum`. A correct
// aggregation ends with sum == (1 << workers) - 1, and counting a contribution twice carries into
// another bit, so the sum proves "every worker exactly once" independently of the bitmap.
#include <cstdint>

namespace mlsim::ina {

enum class PacketKind : std::uint8_t {
  kGradient,       // worker -> switch: one worker's chunk
  kPartial,        // switch -> PS: a (possibly complete) aggregate with its bitmap
  kResult,         // PS -> switch -> workers: the finished aggregate (ATP's ACK/parameter packet)
  kResendRequest,  // PS -> worker: send your chunk again, straight to me (DSA selective
                   // retransmission)
};

struct Packet {
  std::uint64_t seq = 0;     // chunk sequence within the job: iteration * units + unit
  std::uint64_t sum = 0;     // aggregated contributions (worker w adds 1 << w)
  std::uint32_t bitmap = 0;  // workers whose contribution is in `sum`
  std::uint16_t job = 0;
  std::uint16_t worker = 0;    // sender of a gradient, addressee of a resend request or re-answer
  std::uint16_t packets = 1;   // wire packets in the burst
  std::uint16_t priority = 0;  // DSA control-plane priority of the chunk (higher wins)
  PacketKind kind = PacketKind::kGradient;
  // Gradient: a retransmission (bypasses ATP/DSA aggregation, flushes a matching aggregator).
  // Result: a re-answer to a retransmission, unicast to `worker` (SwitchML shadow copy, PS).
  // One bit each, so that a Packet stays 32 bytes (an event capturing it stays inline).
  bool resend : 1 = false;
  bool ecn : 1 = false;        // congestion experienced on the way
  bool evicted : 1 = false;    // a partial pushed out by preemption (DSA)
  bool fell_back : 1 = false;  // a gradient the switch could not aggregate (collision), to the PS
};
static_assert(sizeof(Packet) == 32, "a Packet rides inside event captures: keep it 32 bytes");

inline constexpr std::uint32_t full_bitmap(int workers) {
  return workers >= 32 ? 0xffffffffu : (1u << workers) - 1;
}

}  // namespace mlsim::ina
