#include "sim_core/network/ns3/ns3_network.hpp"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "sim_core/base/error.hpp"

namespace mlsim {
namespace {

std::vector<ns3_bridge::PacketLink> packet_links(const Topology& topology) {
  std::vector<ns3_bridge::PacketLink> out;
  out.reserve(topology.links().size());
  for (const Link& l : topology.links())
    out.push_back({l.src, l.dst, l.bandwidth.bytes_per_s, l.latency.count_ns()});
  return out;
}

std::vector<std::uint32_t> as_indices(const std::vector<LinkId>& path) {
  return {path.begin(), path.end()};
}

// With nothing to deliver before it, the bridge lets ns-3 run at most this far ahead of the
// engine per step (only matters when the engine itself has no event).
constexpr Time kHorizon = Time::ms(10);

}  // namespace

std::uint64_t estimated_packets(Bytes bytes, std::uint32_t mtu) {
  const std::uint64_t payload = mtu > 40 ? mtu - 40 : 1;
  const auto b = static_cast<std::uint64_t>(std::max<std::int64_t>(bytes.count, 0));
  return (b + payload - 1) / payload;
}

Ns3Network::Ns3Network(Engine& engine, const Topology& topology, Ns3Options options)
    : engine_(engine),
      topology_(topology),
      options_(std::move(options)),
      router_(topology),
      packets_([&]() -> ns3_bridge::PacketSimulation {
        try {
          return {static_cast<std::uint32_t>(topology.nodes().size()), packet_links(topology),
                  options_.packets};
        } catch (const std::logic_error& e) {
          throw InvariantError(e.what());
        }
      }()),
      origin_(engine.now()),
      links_(topology.links().size()) {
  engine_.add_external_clock(this);
}

Ns3Network::~Ns3Network() {
  engine_.remove_external_clock(this);
}

void Ns3Network::sync_ns3_clock() {
  // ns-3 sleeps while no flow is active; bring it to the engine's date before a new flow starts.
  const std::int64_t target = ns3_time(engine_.now());
  while (packets_.now_ns() < target) {
    packets_.run_until(target);
    for (const auto& d : packets_.take_deliveries())  // none expected: no flow was active
      schedule_finish(d.flow, std::max(engine_.now(), engine_time(d.time_ns)), d.failed);
  }
}

std::vector<LinkId> Ns3Network::route(NodeId src, NodeId dst, std::uint64_t label) {
  auto r = router_.route(src, dst, label);
  return r ? std::vector<LinkId>(r->links.begin(), r->links.end()) : std::vector<LinkId>{};
}

std::vector<LinkId> Ns3Network::reverse_of(const std::vector<LinkId>& path, NodeId src, NodeId dst,
                                           std::uint64_t label) {
  std::vector<LinkId> reverse;
  for (auto it = path.rbegin(); it != path.rend(); ++it) {
    const Link& fwd = topology_.link(*it);
    const auto& back = topology_.out_links(fwd.dst);
    auto found = std::find_if(back.begin(), back.end(), [&](LinkId l) {
      return topology_.link(l).dst == fwd.src && router_.link_up(l);
    });
    if (found == back.end()) return route(dst, src, label);  // one-way cable
    reverse.push_back(*found);
  }
  return reverse;
}

void Ns3Network::mark_active(const std::vector<LinkId>& path, int delta) {
  for (LinkId l : path) {
    LinkState& s = links_[l];
    if (delta > 0 && s.active++ == 0) s.busy_since = engine_.now();
    if (delta < 0 && --s.active == 0) s.busy_seconds += (engine_.now() - s.busy_since).seconds();
  }
}

void Ns3Network::schedule_finish(TransferId id, Time at, bool failed) {
  auto it = transfers_.find(id);
  if (it == transfers_.end() || it->second.completing) return;
  it->second.completing = true;
  engine_.schedule_at(at, [this, id, failed] { finish(id, failed); });
}

void Ns3Network::finish(TransferId id, bool failed) {
  auto node = transfers_.extract(id);
  Transfer& t = node.mapped();
  mark_active(t.path, -1);
  if (t.in_ns3) {
    --flows_in_ns3_;
    if (!failed)
      for (LinkId l : t.path) links_[l].bytes_carried += t.bytes.count;
  }
  totals_.count_end(t.bytes, failed);
  t.done(TransferResult{id, t.src, t.dst, t.bytes, t.started, engine_.now(), failed});
}

TransferId Ns3Network::start_transfer(NodeId src, NodeId dst, Bytes bytes, DeliveryCallback done,
                                      std::uint64_t flow_label) {
  MLSIM_CHECK(src < topology_.nodes().size() && dst < topology_.nodes().size(),
              "transfer endpoint out of range");
  MLSIM_CHECK(bytes.count >= 0, "negative transfer size");
  const TransferId id = next_id_++;
  totals_.count_start(bytes);
  Transfer& t = transfers_[id];
  t.src = src;
  t.dst = dst;
  t.bytes = bytes;
  t.started = engine_.now();
  t.done = std::move(done);
  t.label = flow_label;
  if (src == dst) {
    schedule_finish(id, engine_.now(), false);
    return id;
  }
  t.path = route(src, dst, flow_label);
  if (t.path.empty()) {
    schedule_finish(id, engine_.now(), true);
    return id;
  }
  mark_active(t.path, +1);
  if (bytes.count == 0) {  // nothing to put in a packet: just the propagation delay
    schedule_finish(id, engine_.now() + router_.latency(t.path), false);
    return id;
  }
  t.reverse_path = reverse_of(t.path, src, dst, flow_label);
  estimated_packets_ += estimated_packets(bytes, options_.packets.mtu);
  if (!warned_ && estimated_packets_ > options_.warn_packets) {
    warned_ = true;
    std::fprintf(stderr,
                 "mlsim: warning: the ns3 backend has been given about %llu packets so far "
                 "(bytes / MTU); packet-level simulation runs at some 30-50 k packets per wall "
                 "second\n",
                 static_cast<unsigned long long>(estimated_packets_));
  }
  sync_ns3_clock();
  packets_.start_flow(id, src, dst, static_cast<std::uint64_t>(bytes.count), as_indices(t.path),
                      as_indices(t.reverse_path));
  t.in_ns3 = true;
  ++flows_in_ns3_;
  return id;
}

bool Ns3Network::cancel_transfer(TransferId id) {
  auto it = transfers_.find(id);
  if (it == transfers_.end() || it->second.completing) return false;
  if (it->second.in_ns3) {
    sync_ns3_clock();
    const std::uint64_t got = packets_.abort_flow(id);
    for (LinkId l : it->second.path) links_[l].bytes_carried += static_cast<std::int64_t>(got);
  }
  schedule_finish(id, engine_.now(), true);
  return true;
}

void Ns3Network::set_link_bandwidth(LinkId link, Bandwidth bw) {
  MLSIM_CHECK(bw.bytes_per_s > 0, "link bandwidth must be positive (fail the link instead)");
  sync_ns3_clock();
  packets_.set_link_rate(link, bw.bytes_per_s);
}

void Ns3Network::set_link_latency(LinkId link, Time latency) {
  sync_ns3_clock();
  router_.set_link_latency(link, latency);
  packets_.set_link_delay(link, latency.count_ns());
}

void Ns3Network::set_link_up(LinkId link, bool up) {
  sync_ns3_clock();
  packets_.set_link_up(link, up);
  router_.set_link_up(link, up);
  if (up) return;
  std::vector<TransferId> crossing;
  for (const auto& [id, t] : transfers_) {
    if (t.completing || !t.in_ns3) continue;
    const bool on_path =
        std::find(t.path.begin(), t.path.end(), link) != t.path.end() ||
        std::find(t.reverse_path.begin(), t.reverse_path.end(), link) != t.reverse_path.end();
    if (on_path) crossing.push_back(id);
  }
  std::sort(crossing.begin(), crossing.end());
  for (TransferId id : crossing) {
    Transfer& t = transfers_.at(id);
    auto path = route(t.src, t.dst, t.label);
    auto reverse = path.empty() ? path : reverse_of(path, t.src, t.dst, t.label);
    if (path.empty() || reverse.empty()) {
      const std::uint64_t got = packets_.abort_flow(id);
      for (LinkId l : t.path) links_[l].bytes_carried += static_cast<std::int64_t>(got);
      schedule_finish(id, engine_.now(), true);
      continue;
    }
    mark_active(t.path, -1);
    t.path = std::move(path);
    t.reverse_path = std::move(reverse);
    mark_active(t.path, +1);
    packets_.reroute_flow(id, as_indices(t.path), as_indices(t.reverse_path));
  }
}

LinkStats Ns3Network::link_stats(LinkId link) const {
  const LinkState& s = links_.at(link);
  LinkStats stats;
  stats.bytes_carried = Bytes{s.bytes_carried};
  stats.busy_seconds =
      s.busy_seconds + (s.active > 0 ? (engine_.now() - s.busy_since).seconds() : 0.0);
  return stats;
}

Time Ns3Network::next_event_time() {
  if (flows_in_ns3_ == 0) return Time::max();
  return std::max(engine_.now(), engine_time(packets_.now_ns())) + kHorizon;
}

void Ns3Network::advance_to(Time t) {
  if (flows_in_ns3_ == 0) return;
  packets_.run_until(ns3_time(t));
  for (const auto& d : packets_.take_deliveries())
    schedule_finish(d.flow, std::max(engine_.now(), engine_time(d.time_ns)), d.failed);
}

}  // namespace mlsim
