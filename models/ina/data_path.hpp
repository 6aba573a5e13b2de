#pragma once
// How INA packets move between the hosts (workers, parameter servers) and the switch program
// (the policy with its aggregator pool, policy.hpp). Two paths carry the same program:
// - packet_path.hpp: the model's own packet-level host <-> switch links (per-packet FIFO
//   serialisation, latency, ECN from queue depth) on a one-switch star; `network.backend` is not
//   used (the default, `system.data_path` "packet");
// - network_path.hpp: every burst is a transfer of the scenario's Network backend (flow,
//   analytic, SimGrid, ns-3) between a host node and the switch node hosting the program
//   (sim_core/network/switch_program.hpp), over any topology (`system.data_path` "network").
// Hosts are numbered as the cluster places them: job j's workers, then its PS, consecutively.
#include <cstddef>

#include "models/ina/packet.hpp"

namespace mlsim::ina {

enum class DataPathKind { kPacket, kNetwork };

// What a path delivers to at a host: the worker or PS placed there.
class HostEnds {
 public:
  virtual ~HostEnds() = default;
  virtual void at_host(std::size_t host, const Packet& p) = 0;
};

class DataPath {
 public:
  virtual ~DataPath() = default;
  // A burst from host `host` to the switch program. `forwarded`: relayed as it arrives (a PS
  // passing bursts on) rather than ready all at once (a worker's chunk). `lost`: dropped on the
  // way (the loss model decided; packet_loss.hpp).
  virtual void to_switch(std::size_t host, const Packet& p, bool forwarded, bool lost) = 0;
  // A burst from the switch program to host `host`.
  virtual void from_switch(std::size_t host, const Packet& p, bool lost) = 0;
  // Bursts the path could not deliver for want of a route (failed links); never on the packet
  // path. Recovered like losses, by the senders' timeouts.
  virtual std::uint64_t undelivered_packets() const { return 0; }
};

}  // namespace mlsim::ina
