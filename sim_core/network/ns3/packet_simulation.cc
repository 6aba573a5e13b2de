// ns-3 side of the bridge (C++17). See packet_simulation.hpp.
//
// Routing: mlsim decides every path. Each path into a node gets its own IP address on that node
// (an alias on the loopback interface, 11.<node>.<k>), and every node on the path gets a static
// host route for that address towards the path's next hop. Flows with the same path share the
// alias; flows between the same hosts over different ECMP paths use different aliases, so
// ns-3 forwards each data packet exactly where mlsim's router sent its flow.
// Acknowledgements go to the sender's interface address (ns-3's TCP always takes the source
// address of its first hop), routed along the reverse of the first flow that used that address;
// with ECMP their path may differ from the reverse of a later flow's, which only moves ACKs.
#include "sim_core/network/ns3/packet_simulation.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <unordered_map>

#include "ns3/config.h"
#include "ns3/data-rate.h"
#include "ns3/error-model.h"
#include "ns3/inet-socket-address.h"
#include "ns3/internet-stack-helper.h"
#include "ns3/ipv4-header.h"
#include "ns3/ipv4-routing-table-entry.h"
#include "ns3/ipv4-static-routing-helper.h"
#include "ns3/ipv4-static-routing.h"
#include "ns3/ipv4.h"
#include "ns3/node-container.h"
#include "ns3/node.h"
#include "ns3/packet.h"
#include "ns3/point-to-point-channel.h"
#include "ns3/point-to-point-helper.h"
#include "ns3/point-to-point-net-device.h"
#include "ns3/ppp-header.h"
#include "ns3/queue-size.h"
#include "ns3/simulator.h"
#include "ns3/socket.h"
#include "ns3/string.h"
#include "ns3/tcp-socket-factory.h"
#include "ns3/traffic-control-layer.h"
#include "ns3/udp-header.h"
#include "ns3/udp-socket-factory.h"
#include "ns3/uinteger.h"

namespace mlsim::ns3_bridge {
namespace {

bool& simulation_alive() {  // ns-3's Simulator is a process singleton: so is this guard
  static bool alive = false;
  return alive;
}

constexpr std::uint32_t kTcpIpHeaders = 40;
constexpr std::uint32_t kUdpIpHeaders = 28;
constexpr std::uint32_t kPppHeader = 2;

}  // namespace

// One transfer: its sockets and counters. Owned by Impl (stable address for ns-3 callbacks).
struct Flow {
  PacketSimulation::Impl* sim = nullptr;
  std::uint64_t id = 0;
  std::uint32_t src = 0, dst = 0;
  std::uint64_t bytes = 0, queued = 0, received = 0;
  std::uint16_t port = 0;
  std::uint32_t dst_address = 0, src_address = 0;
  ns3::Ptr<ns3::Socket> sender, listener, receiver;
  ns3::EventId next_datagram;
  double udp_interval_s = 0;
  bool finished = false;

  void fill_tcp(ns3::Ptr<ns3::Socket> socket, std::uint32_t);
  void send_datagram();
  void on_accept(ns3::Ptr<ns3::Socket> socket, const ns3::Address&);
  void on_receive(ns3::Ptr<ns3::Socket> socket);
  void on_connect_failed(ns3::Ptr<ns3::Socket>);
  void close();
};

struct PacketSimulation::Impl {
  struct LinkEnd {
    ns3::Ptr<ns3::PointToPointNetDevice> device;  // sending device at link.src
    ns3::Ptr<ns3::PointToPointNetDevice> peer;    // receiving device at link.dst
    std::uint32_t interface = 0;                  // ipv4 interface of `device`
    ns3::Ipv4Address local;                       // address of `device`
    ns3::Ipv4Address next_hop;                    // address of `peer`
    ns3::Ptr<ns3::RateErrorModel> blackhole;      // enabled while the link is down
  };

  PacketOptions options;
  std::vector<PacketLink> links;
  ns3::NodeContainer nodes;
  std::vector<LinkEnd> ends;
  std::vector<std::uint32_t> aliases_used;  // per node
  std::map<std::pair<std::uint32_t, std::vector<std::uint32_t>>, std::uint32_t> alias_of_path;
  std::unordered_map<std::uint64_t, std::unique_ptr<Flow>> flows;
  std::unordered_map<std::uint16_t, Flow*> udp_by_port;
  // Ports are unique among running flows across all nodes, so a dropped datagram's port names
  // its flow.
  std::uint16_t next_port = 1000;
  std::vector<PacketDelivery> deliveries;
  PacketCounters counters;

  ns3::Ptr<ns3::Ipv4StaticRouting> routing(std::uint32_t node) {
    ns3::Ipv4StaticRoutingHelper helper;
    return helper.GetStaticRouting(nodes.Get(node)->GetObject<ns3::Ipv4>());
  }

  void set_host_route(std::uint32_t node, ns3::Ipv4Address to, const LinkEnd& via) {
    auto table = routing(node);
    for (std::uint32_t i = table->GetNRoutes(); i-- > 0;)
      if (table->GetRoute(i).GetDest() == to) table->RemoveRoute(i);
    table->AddHostRouteTo(to, via.next_hop, via.interface);
  }

  // The address of `node` that `path` (ending at node) leads to, creating it on first use.
  std::uint32_t address_for(std::uint32_t node, const std::vector<std::uint32_t>& path) {
    auto key = std::make_pair(node, path);
    auto it = alias_of_path.find(key);
    if (it != alias_of_path.end()) return it->second;
    std::uint32_t& used = aliases_used.at(node);
    if (used >= 254 || node >= (1u << 16))
      throw std::runtime_error("ns3 backend: more than 254 distinct paths into one node");
    const std::uint32_t address = (11u << 24) | (node << 8) | (++used);
    auto ipv4 = nodes.Get(node)->GetObject<ns3::Ipv4>();
    ipv4->AddAddress(
        0, ns3::Ipv4InterfaceAddress(ns3::Ipv4Address(address), ns3::Ipv4Mask("255.255.255.255")));
    install_routes(address, path);
    alias_of_path.emplace(std::move(key), address);
    return address;
  }

  void install_routes(std::uint32_t address, const std::vector<std::uint32_t>& path) {
    for (std::uint32_t l : path)
      set_host_route(links.at(l).src, ns3::Ipv4Address(address), ends[l]);
  }

  // Routes towards a sender's interface address, on the nodes that have none yet.
  void add_missing_routes(ns3::Ipv4Address to, const std::vector<std::uint32_t>& path) {
    for (std::uint32_t l : path) {
      auto table = routing(links.at(l).src);
      bool present = false;
      for (std::uint32_t i = 0; i < table->GetNRoutes() && !present; ++i)
        present = table->GetRoute(i).GetDest() == to;
      if (!present) table->AddHostRouteTo(to, ends[l].next_hop, ends[l].interface);
    }
  }

  void on_transmit(ns3::Ptr<const ns3::Packet>) { ++counters.packets_sent; }

  // A device queue drops framed packets (PPP + IPv4 + transport); the traffic-control layer
  // drops packets that a full device queue refused, before IP framing (transport only).
  void on_device_drop(ns3::Ptr<const ns3::Packet> packet) { on_drop(packet, true); }
  void on_queue_full_drop(ns3::Ptr<const ns3::Packet> packet) { on_drop(packet, false); }

  void on_drop(ns3::Ptr<const ns3::Packet> packet, bool framed) {
    ++counters.packets_dropped;
    if (options.tcp) return;  // TCP recovers by itself
    // A paced UDP flow has no retransmission: losing a datagram fails it.
    ns3::Ptr<ns3::Packet> copy = packet->Copy();
    if (framed) {
      ns3::PppHeader ppp;
      ns3::Ipv4Header ip;
      copy->RemoveHeader(ppp);
      copy->RemoveHeader(ip);
      if (ip.GetProtocol() != 17) return;
    }
    ns3::UdpHeader udp;
    copy->RemoveHeader(udp);
    auto it = udp_by_port.find(udp.GetDestinationPort());
    if (it == udp_by_port.end() || it->second->finished) return;
    Flow* f = it->second;
    f->finished = true;
    deliveries.push_back({f->id, ns3::Simulator::Now().GetNanoSeconds(), true});
    f->close();
    ns3::Simulator::Stop();
  }

  void delivered(Flow& f) {
    f.finished = true;
    deliveries.push_back({f.id, ns3::Simulator::Now().GetNanoSeconds(), false});
    f.close();
    ns3::Simulator::Stop();  // return to mlsim right after this event
  }
};

void Flow::fill_tcp(ns3::Ptr<ns3::Socket> socket, std::uint32_t) {
  while (queued < bytes) {
    const std::uint32_t room = socket->GetTxAvailable();
    if (room == 0) return;
    const auto n =
        static_cast<std::uint32_t>(std::min<std::uint64_t>({room, bytes - queued, 1u << 20}));
    const int accepted = socket->Send(ns3::Create<ns3::Packet>(n));
    if (accepted <= 0) return;
    queued += static_cast<std::uint64_t>(accepted);
  }
  socket->Close();  // FIN after the data
}

void Flow::send_datagram() {
  if (finished || queued >= bytes) return;
  const std::uint32_t payload = sim->options.mtu - kUdpIpHeaders;
  const auto n = static_cast<std::uint32_t>(std::min<std::uint64_t>(payload, bytes - queued));
  sender->Send(ns3::Create<ns3::Packet>(n));
  queued += n;
  if (queued < bytes)
    next_datagram =
        ns3::Simulator::Schedule(ns3::Seconds(udp_interval_s), &Flow::send_datagram, this);
}

void Flow::on_accept(ns3::Ptr<ns3::Socket> socket, const ns3::Address&) {
  receiver = socket;
  socket->SetRecvCallback(ns3::MakeCallback(&Flow::on_receive, this));
}

void Flow::on_receive(ns3::Ptr<ns3::Socket> socket) {
  while (ns3::Ptr<ns3::Packet> p = socket->Recv()) {
    received += p->GetSize();
    if (!finished && received >= bytes) sim->delivered(*this);
  }
}

void Flow::on_connect_failed(ns3::Ptr<ns3::Socket>) {
  if (finished) return;
  finished = true;
  sim->deliveries.push_back({id, ns3::Simulator::Now().GetNanoSeconds(), true});
  ns3::Simulator::Stop();
}

void Flow::close() {
  next_datagram.Cancel();
  // Sockets are closed, not destroyed: TCP finishes its handshake on its own.
  if (receiver) receiver->SetRecvCallback(ns3::MakeNullCallback<void, ns3::Ptr<ns3::Socket>>());
  if (listener) listener->Close();
  if (!sim->options.tcp && sender) sender->Close();
}

PacketSimulation::PacketSimulation(std::uint32_t node_count, const std::vector<PacketLink>& links,
                                   const PacketOptions& options)
    : impl_(std::make_unique<Impl>()) {
  if (simulation_alive())
    throw std::logic_error(
        "only one ns3 network may exist at a time in a process (ns-3's Simulator is a singleton)");
  simulation_alive() = true;
  Impl& m = *impl_;
  m.options = options;
  m.links = links;
  using namespace ns3;
  Config::SetDefault("ns3::TcpL4Protocol::SocketType",
                     TypeIdValue(TypeId::LookupByName(options.tcp_variant)));
  Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(options.mtu - kTcpIpHeaders));
  Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(options.tcp_buffer_bytes));
  Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(options.tcp_buffer_bytes));
  Config::SetDefault("ns3::TcpSocket::InitialCwnd", UintegerValue(options.initial_cwnd_segments));
  Config::SetDefault("ns3::TcpSocketBase::MinRto", TimeValue(NanoSeconds(options.min_rto_ns)));

  m.nodes.Create(node_count);
  InternetStackHelper stack;
  Ipv4StaticRoutingHelper static_routing;
  stack.SetRoutingHelper(static_routing);
  stack.Install(m.nodes);
  m.aliases_used.assign(node_count, 0);
  for (std::uint32_t n = 0; n < node_count; ++n)
    m.nodes.Get(n)->GetObject<TrafficControlLayer>()->TraceConnectWithoutContext(
        "Drop", MakeCallback(&Impl::on_queue_full_drop, impl_.get()));
  m.ends.resize(links.size());

  // Pair each link with its reverse (a duplex cable) so that one point-to-point channel carries
  // both directions; a link without a reverse gets a channel whose reverse device stays unused.
  std::vector<bool> done(links.size(), false);
  std::uint32_t subnet = 0;
  for (std::uint32_t l = 0; l < links.size(); ++l) {
    if (done[l]) continue;
    const PacketLink& fwd = links[l];
    std::int64_t rev = -1;
    for (std::uint32_t r = l + 1; r < links.size() && rev < 0; ++r)
      if (!done[r] && links[r].src == fwd.dst && links[r].dst == fwd.src &&
          links[r].latency_ns == fwd.latency_ns)
        rev = r;
    PointToPointHelper p2p;
    p2p.SetDeviceAttribute(
        "DataRate", DataRateValue(DataRate(static_cast<std::uint64_t>(fwd.bytes_per_s * 8))));
    p2p.SetDeviceAttribute("Mtu", UintegerValue(options.mtu));
    p2p.SetChannelAttribute("Delay", TimeValue(NanoSeconds(fwd.latency_ns)));
    p2p.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize",
                 QueueSizeValue(QueueSize(std::to_string(options.queue_packets) + "p")));
    NetDeviceContainer devices = p2p.Install(m.nodes.Get(fwd.src), m.nodes.Get(fwd.dst));
    auto a = DynamicCast<PointToPointNetDevice>(devices.Get(0));
    auto b = DynamicCast<PointToPointNetDevice>(devices.Get(1));
    if (rev >= 0) b->SetDataRate(DataRate(static_cast<std::uint64_t>(links[rev].bytes_per_s * 8)));
    const std::uint32_t base = (10u << 24) | (subnet++ << 2);
    std::uint32_t if_a = 0, if_b = 0;
    for (int side = 0; side < 2; ++side) {
      auto dev = side == 0 ? a : b;
      auto ipv4 = dev->GetNode()->GetObject<Ipv4>();
      const std::uint32_t i = ipv4->AddInterface(dev);
      ipv4->AddAddress(i, Ipv4InterfaceAddress(Ipv4Address(base + 1 + side), Ipv4Mask("/30")));
      ipv4->SetUp(i);
      (side == 0 ? if_a : if_b) = i;
      dev->GetQueue()->TraceConnectWithoutContext("Drop",
                                                  MakeCallback(&Impl::on_device_drop, impl_.get()));
      dev->TraceConnectWithoutContext("MacTx", MakeCallback(&Impl::on_transmit, impl_.get()));
    }
    auto blackhole = [] {
      auto em = CreateObject<RateErrorModel>();
      em->SetUnit(RateErrorModel::ERROR_UNIT_PACKET);
      em->SetRate(1.0);
      em->Disable();
      return em;
    };
    m.ends[l] =
        Impl::LinkEnd{a, b, if_a, Ipv4Address(base + 1), Ipv4Address(base + 2), blackhole()};
    b->SetReceiveErrorModel(m.ends[l].blackhole);
    done[l] = true;
    if (rev >= 0) {
      m.ends[rev] =
          Impl::LinkEnd{b, a, if_b, Ipv4Address(base + 2), Ipv4Address(base + 1), blackhole()};
      a->SetReceiveErrorModel(m.ends[rev].blackhole);
      done[rev] = true;
    }
  }
}

PacketSimulation::~PacketSimulation() {
  for (auto& [id, flow] : impl_->flows) flow->next_datagram.Cancel();
  impl_->flows.clear();
  ns3::Simulator::Destroy();
  simulation_alive() = false;
}

std::int64_t PacketSimulation::now_ns() const {
  return ns3::Simulator::Now().GetNanoSeconds();
}

void PacketSimulation::run_until(std::int64_t t_ns) {
  const std::int64_t now = now_ns();
  if (t_ns < now) return;
  ns3::EventId stop = ns3::Simulator::Schedule(ns3::NanoSeconds(t_ns - now),
                                               static_cast<void (*)()>(&ns3::Simulator::Stop));
  ns3::Simulator::Run();
  stop.Cancel();  // still pending when a delivery stopped the run first
}

std::vector<PacketDelivery> PacketSimulation::take_deliveries() {
  std::vector<PacketDelivery> out;
  out.swap(impl_->deliveries);
  return out;
}

void PacketSimulation::start_flow(std::uint64_t id, std::uint32_t src, std::uint32_t dst,
                                  std::uint64_t bytes, const std::vector<std::uint32_t>& path,
                                  const std::vector<std::uint32_t>& reverse_path) {
  using namespace ns3;
  Impl& m = *impl_;
  auto owned = std::make_unique<Flow>();
  Flow& f = *owned;
  m.flows.emplace(id, std::move(owned));
  f.sim = &m;
  f.id = id;
  f.src = src;
  f.dst = dst;
  f.bytes = bytes;
  f.dst_address = m.address_for(dst, path);
  f.src_address = m.ends.at(path.front()).local.Get();
  m.add_missing_routes(Ipv4Address(f.src_address), reverse_path);
  f.port = m.next_port;
  m.next_port = m.next_port == 65000 ? 1000 : m.next_port + 1;

  if (m.options.tcp) {
    f.listener = Socket::CreateSocket(m.nodes.Get(dst), TcpSocketFactory::GetTypeId());
    f.listener->Bind(InetSocketAddress(Ipv4Address(f.dst_address), f.port));
    f.listener->Listen();
    f.listener->SetAcceptCallback(MakeNullCallback<bool, Ptr<Socket>, const Address&>(),
                                  MakeCallback(&Flow::on_accept, &f));
    f.sender = Socket::CreateSocket(m.nodes.Get(src), TcpSocketFactory::GetTypeId());
    f.sender->Bind(InetSocketAddress(Ipv4Address(f.src_address), 0));
    f.sender->SetConnectCallback(MakeNullCallback<void, Ptr<Socket>>(),
                                 MakeCallback(&Flow::on_connect_failed, &f));
    f.sender->SetSendCallback(MakeCallback(&Flow::fill_tcp, &f));
    f.sender->Connect(InetSocketAddress(Ipv4Address(f.dst_address), f.port));
    f.fill_tcp(f.sender, 0);
  } else {
    f.receiver = Socket::CreateSocket(m.nodes.Get(dst), UdpSocketFactory::GetTypeId());
    f.receiver->Bind(InetSocketAddress(Ipv4Address(f.dst_address), f.port));
    f.receiver->SetRecvCallback(MakeCallback(&Flow::on_receive, &f));
    m.udp_by_port[f.port] = &f;
    f.sender = Socket::CreateSocket(m.nodes.Get(src), UdpSocketFactory::GetTypeId());
    f.sender->Bind(InetSocketAddress(Ipv4Address(f.src_address), 0));
    f.sender->Connect(InetSocketAddress(Ipv4Address(f.dst_address), f.port));
    const double rate = m.links.at(path.front()).bytes_per_s * m.options.udp_rate_fraction;
    f.udp_interval_s = (m.options.mtu + kPppHeader) / rate;
    f.send_datagram();
  }
}

void PacketSimulation::reroute_flow(std::uint64_t id, const std::vector<std::uint32_t>& path,
                                    const std::vector<std::uint32_t>& reverse_path) {
  Impl& m = *impl_;
  Flow& f = *m.flows.at(id);
  // The flow keeps its addresses: their routes now follow the new paths (flows that shared the
  // old path move with it).
  m.install_routes(f.dst_address, path);
  m.install_routes(f.src_address, reverse_path);
  for (auto it = m.alias_of_path.begin(); it != m.alias_of_path.end();)
    it = it->second == f.dst_address ? m.alias_of_path.erase(it) : std::next(it);
  m.alias_of_path.emplace(std::make_pair(f.dst, path), f.dst_address);
}

std::uint64_t PacketSimulation::abort_flow(std::uint64_t id) {
  Impl& m = *impl_;
  auto it = m.flows.find(id);
  if (it == m.flows.end()) return 0;
  Flow& f = *it->second;
  const std::uint64_t got = f.received;
  if (!f.finished) {
    f.finished = true;
    f.close();
    if (f.sender) f.sender->Close();
  }
  return got;
}

std::uint64_t PacketSimulation::bytes_received(std::uint64_t id) const {
  auto it = impl_->flows.find(id);
  return it == impl_->flows.end() ? 0 : it->second->received;
}

void PacketSimulation::set_link_rate(std::uint32_t link, double bytes_per_s) {
  impl_->ends.at(link).device->SetDataRate(
      ns3::DataRate(static_cast<std::uint64_t>(bytes_per_s * 8)));
}

void PacketSimulation::set_link_delay(std::uint32_t link, std::int64_t delay_ns) {
  // The channel is the cable: both directions of a paired link change.
  impl_->ends.at(link).device->GetChannel()->SetAttribute(
      "Delay", ns3::TimeValue(ns3::NanoSeconds(delay_ns)));
}

void PacketSimulation::set_link_up(std::uint32_t link, bool up) {
  auto& em = impl_->ends.at(link).blackhole;
  if (up)
    em->Disable();
  else
    em->Enable();
}

PacketCounters PacketSimulation::counters() const {
  PacketCounters c = impl_->counters;
  c.events = ns3::Simulator::GetEventCount();
  return c;
}

}  // namespace mlsim::ns3_bridge
