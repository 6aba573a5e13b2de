#pragma once
// C++17 facade over ns-3 3.37 (whose headers do not compile as C++20 with GCC 12). Only this
// header crosses between the C++17 target that includes ns-3 and mlsim's C++20 adapter
// (ns3_network.hpp), so it uses plain types: node and link indices, nanoseconds, bytes.
//
// ns-3's Simulator is a process-wide singleton: at most one PacketSimulation may exist at a time
// (a second one throws std::logic_error); each one starts ns-3 from time zero and destroys the
// simulator's state when it goes away.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mlsim::ns3_bridge {

struct PacketLink {  // one direction of a cable, as in mlsim's Topology
  std::uint32_t src = 0, dst = 0;
  double bytes_per_s = 0;
  std::int64_t latency_ns = 0;
};

struct PacketOptions {
  bool tcp = true;  // false: paced UDP (RDMA-like, no congestion control)
  std::string tcp_variant = "ns3::TcpNewReno";
  std::uint32_t mtu = 1500;                    // IP MTU of every device
  std::uint32_t queue_packets = 1000;          // drop-tail device queue per link direction
  std::int64_t min_rto_ns = 1'000'000;         // ns-3 defaults to 1 s, far above datacenter RTTs
  std::uint32_t tcp_buffer_bytes = 16u << 20;  // send/receive buffers: no window limit
  std::uint32_t initial_cwnd_segments = 10;
  double udp_rate_fraction = 1.0;  // UDP pacing, as a fraction of the first link's rate
};

struct PacketDelivery {
  std::uint64_t flow = 0;
  std::int64_t time_ns = 0;
  bool failed = false;  // UDP flow that lost a packet
};

struct PacketCounters {
  std::uint64_t packets_sent = 0;     // handed to a device by IP (data and acks, every hop)
  std::uint64_t packets_dropped = 0;  // by device queues
  std::uint64_t events = 0;  // ns-3 events executed (estimate from Simulator::GetEventCount)
};

struct Flow;

class PacketSimulation {
 public:
  PacketSimulation(std::uint32_t nodes, const std::vector<PacketLink>& links,
                   const PacketOptions& options);
  ~PacketSimulation();
  PacketSimulation(const PacketSimulation&) = delete;
  PacketSimulation& operator=(const PacketSimulation&) = delete;

  std::int64_t now_ns() const;
  // Runs ns-3 up to `t_ns`, but returns right after the event that completes a flow, so that the
  // caller sees every delivery at its date before anything later happens.
  void run_until(std::int64_t t_ns);
  // Deliveries since the last call, in the order they happened.
  std::vector<PacketDelivery> take_deliveries();

  // Starts `bytes` from src to dst now along `path` (link indices); acknowledgements return along
  // `reverse_path`. `flow` is the caller's id.
  void start_flow(std::uint64_t flow, std::uint32_t src, std::uint32_t dst, std::uint64_t bytes,
                  const std::vector<std::uint32_t>& path,
                  const std::vector<std::uint32_t>& reverse_path);
  // Moves a running flow onto new paths (after a failure); bytes already sent are not re-sent.
  void reroute_flow(std::uint64_t flow, const std::vector<std::uint32_t>& path,
                    const std::vector<std::uint32_t>& reverse_path);
  // Stops a flow without reporting it; returns the bytes its receiver got.
  std::uint64_t abort_flow(std::uint64_t flow);
  std::uint64_t bytes_received(std::uint64_t flow) const;

  void set_link_rate(std::uint32_t link, double bytes_per_s);
  // Sets the propagation delay of the link's channel, which a duplex cable's two directions share.
  void set_link_delay(std::uint32_t link, std::int64_t delay_ns);
  // A down link drops every packet it receives.
  void set_link_up(std::uint32_t link, bool up);

  PacketCounters counters() const;

 private:
  friend struct Flow;  // a flow's ns-3 callbacks report back to the simulation
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mlsim::ns3_bridge
