#include "sim_core/network/ns3/ns3_backend.hpp"

#include "sim_core/network/ns3/ns3_network.hpp"
#include "sim_core/scenario/json_reader.hpp"

namespace mlsim {

void register_ns3_backend(BackendRegistry& registry) {
  registry.add(BackendInfo{
      "ns3",
      "ns-3 3.37 packet level: point-to-point links, drop-tail queues, TCP (slow start, "
      "losses, headers) or paced UDP flows on mlsim's routes; slow (some 30-50 k packets per "
      "wall second), one ns3 run per process at a time",
      [](JsonReader& r) {
        r.ignore("backend");
        Ns3Options o;
        auto& p = o.packets;
        p.tcp = r.choice_or("transport", {"tcp", "udp"}, "tcp") == "tcp";
        p.tcp_variant =
            "ns3::Tcp" + r.choice_or("tcp_variant", {"NewReno", "Cubic", "Dctcp"}, "NewReno");
        p.mtu = static_cast<std::uint32_t>(r.integer_or("mtu", 1500, 576, 9000));
        p.queue_packets =
            static_cast<std::uint32_t>(r.integer_or("queue_packets", 1000, 1, 1 << 24));
        p.min_rto_ns = r.duration_or("min_rto", "1ms").count_ns();
        p.tcp_buffer_bytes = static_cast<std::uint32_t>(
            r.integer_or("tcp_buffer_bytes", 16 << 20, 4096, std::int64_t{1} << 31));
        p.initial_cwnd_segments =
            static_cast<std::uint32_t>(r.integer_or("initial_cwnd", 10, 1, 1000));
        p.udp_rate_fraction = r.number_or("udp_rate_fraction", 1.0, 1e-6, 1.0);
        o.warn_packets = static_cast<std::uint64_t>(
            r.integer_or("warn_packets", 1'000'000, 0, std::int64_t{1} << 62));
        r.finish();
        return std::function<std::unique_ptr<Network>(Engine&, const Topology&)>(
            [o](Engine& engine, const Topology& topology) -> std::unique_ptr<Network> {
              return std::make_unique<Ns3Network>(engine, topology, o);
            });
      },
      // Every ns-3 node, switches included, has an IP stack and gets an address per path into
      // it (packet_simulation.cc), so transfers can end and start at a switch.
      /*hosts_switch_programs=*/true});
}

}  // namespace mlsim
