#pragma once
// Per-message cost profiles of the transports ByteScheduler runs over (TCP and RDMA, SOSP 2019
// section 1 and its evaluation), as defaults of the commsched scenario keys `message_cpu` (the
// sender's CPU per message, one message after another) and `message_overhead` (a delay per
// message that occupies neither host nor link). Every message of a partitioned tensor pays
// them, so they are the per-partition cost; docs/commsched.md sweeps them.
//
// None of the figures is measured: ByteScheduler's paper states per-message costs nowhere we
// could read, and ../shared/data has no host-stack measurement [assumed, round figures: kernel
// TCP with ps-lite/ZeroMQ pays system calls and a copy per message; RDMA posts a work request
// and polls a completion].
namespace mlsim::commsched {

enum class Transport { kNone, kTcp, kRdma };

struct TransportCosts {
  int cpu_us = 0;      // message_cpu default, microseconds
  int latency_us = 0;  // message_overhead default, microseconds
};

constexpr TransportCosts transport_costs(Transport t) {
  switch (t) {
    case Transport::kTcp:
      return {30, 50};  // [assumed]
    case Transport::kRdma:
      return {3, 10};  // [assumed]
    case Transport::kNone:
      break;
  }
  return {0, 0};  // no per-message cost unless the keys give one (the shipped default)
}

}  // namespace mlsim::commsched
