#include "sim_core/network/simgrid/simgrid_network.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <simgrid/kernel/resource/Model.hpp>
#include <simgrid/kernel/resource/NetworkModelIntf.hpp>
#include <simgrid/s4u.hpp>
#include <string>
#include <xbt/config.hpp>

#include "sim_core/base/error.hpp"
#include "sim_core/network/routing.hpp"

namespace mlsim {
namespace sg4 = simgrid::s4u;

namespace {

const char* model_name(SimGridOptions::Model m) {
  return m == SimGridOptions::Model::kCM02 ? "CM02" : "LV08";
}

// SimGrid is a process-wide singleton (one Engine, one network model, static signals), so the
// guard that enforces "one backend at a time, one model per process" must be process-wide too.
struct SimGridProcess {
  SimGridNetwork* live = nullptr;
  bool configured = false;
  SimGridOptions::Model model = SimGridOptions::Model::kCM02;
  bool signal_connected = false;
  int instances = 0;
};
SimGridProcess& simgrid_process() {
  static SimGridProcess process;
  return process;
}

// Engine nanoseconds from a SimGrid offset in seconds, rounded up (a transfer is done once all of
// it is), tolerating a picosecond of floating-point noise.
std::int64_t ceil_ns(double seconds) {
  const double ns = seconds * 1e9;
  const double nearest = std::round(ns);
  if (std::abs(ns - nearest) < 1e-3) return static_cast<std::int64_t>(nearest);
  return static_cast<std::int64_t>(std::ceil(ns));
}

}  // namespace

std::uint64_t max_equal_cost_paths(const Topology& topology) {
  const std::size_t n = topology.nodes().size();
  std::vector<std::vector<LinkId>> in(n);
  for (LinkId l = 0; l < topology.links().size(); ++l) in[topology.link(l).dst].push_back(l);
  std::uint64_t best = 1;
  std::vector<int> dist(n);
  std::vector<std::uint64_t> count(n);
  std::vector<NodeId> order;
  for (NodeId dst : topology.hosts()) {
    // Breadth-first from dst over reversed links; `order` is by increasing distance, so each
    // node's count of shortest paths is the sum over its next hops, already known.
    std::fill(dist.begin(), dist.end(), -1);
    std::fill(count.begin(), count.end(), 0);
    order.assign(1, dst);
    dist[dst] = 0;
    count[dst] = 1;
    for (std::size_t i = 0; i < order.size(); ++i)
      for (LinkId l : in[order[i]]) {
        const NodeId prev = topology.link(l).src;
        if (dist[prev] < 0) {
          dist[prev] = dist[order[i]] + 1;
          order.push_back(prev);
        }
      }
    for (NodeId v : order)
      for (LinkId l : topology.out_links(v)) {
        const NodeId next = topology.link(l).dst;
        if (v != dst && dist[next] == dist[v] - 1)
          count[v] = std::min<std::uint64_t>(count[v] + count[next], 1u << 20);
      }
    for (NodeId src : topology.hosts()) best = std::max(best, count[src]);
  }
  return best;
}

struct SimGridNetwork::Impl {
  struct Transfer {
    NodeId src = 0, dst = 0;
    Bytes bytes;
    Time started;
    DeliveryCallback done;
    std::uint64_t label = 0;
    std::vector<LinkId> path;
    sg4::CommPtr comm;             // null once sent, failed or cancelled
    bool completing = false;       // its delivery or failure event is scheduled
    double sent_on_old_paths = 0;  // bytes moved before a reroute
  };
  struct LinkState {
    sg4::Link* link = nullptr;
    int active = 0;
    Time busy_since;
    double busy_seconds = 0;
    double bytes_carried = 0;
  };

  Engine& engine;
  const Topology& topology;
  SimGridOptions options;
  Router router;
  std::unique_ptr<sg4::Engine> sg;
  sg4::NetZone* zone = nullptr;
  simgrid::kernel::resource::Model* model = nullptr;
  double sg_origin = 0;  // SimGrid date of engine time `engine_origin`
  // What SimGrid multiplies a route's latency by when it pays it (network/latency-factor: CM02
  // 1, LV08 13.01), for the empty transfers this backend delivers itself.
  double latency_factor = 1;
  Time engine_origin;
  Time advanced_to;  // last time SimGrid was advanced to
  int aliases = 1;
  std::vector<std::vector<sg4::Host*>> hosts;  // [node][alias]
  std::vector<LinkState> links;
  // Distinct routes used from one source to one destination (key src << 32 | dst); the index of
  // a route is the alias of the source host that SimGrid routes along it.
  std::unordered_map<std::uint64_t, std::vector<std::vector<LinkId>>> routes;
  std::unordered_map<TransferId, Transfer> transfers;
  std::unordered_map<const void*, TransferId> by_comm;
  // Comms that finished or were cancelled: SimGrid still touches them until its next step, so
  // they are released only after the next run_until.
  std::vector<sg4::CommPtr> finished_comms;
  TransferId next_id = 1;

  Impl(Engine& e, const Topology& t, SimGridOptions o)
      : engine(e), topology(t), options(o), router(t) {}

  double sg_time(Time t) const { return sg_origin + (t - engine_origin).seconds(); }
  Time engine_time(double sg_seconds) const {
    return engine_origin + Time::ns(ceil_ns(sg_seconds - sg_origin));
  }
  bool latency_after_sending() const {
    return options.latency == SimGridOptions::Latency::kAfterSending;
  }
  // When an empty transfer along `path` arrives: nothing to send, then the route's latency as
  // this backend pays it (after sending: the router's; in SimGrid: scaled by the model's factor).
  Time empty_arrival(const std::vector<LinkId>& path) const {
    const Time latency = router.latency(path);
    if (latency_after_sending()) return engine.now() + latency;
    return engine.now() + Time::ns(ceil_ns(latency.seconds() * latency_factor));
  }

  std::vector<LinkId> route(NodeId src, NodeId dst, std::uint64_t label) {
    auto r = router.route(src, dst, label);
    return r ? std::vector<LinkId>(r->links.begin(), r->links.end()) : std::vector<LinkId>{};
  }

  // SimGrid host of `src` whose route to `dst` is `path`, adding the route on first use.
  sg4::Host* source_for(NodeId src, NodeId dst, const std::vector<LinkId>& path) {
    auto& slots = routes[(std::uint64_t{src} << 32) | dst];
    auto it = std::find(slots.begin(), slots.end(), path);
    const auto alias = static_cast<std::size_t>(it - slots.begin());
    if (it == slots.end()) {
      if (alias >= static_cast<std::size_t>(aliases))
        throw InputError("network.spare_routes",
                         "more distinct routes from " + topology.node(src).name + " to " +
                             topology.node(dst).name + " than SimGrid hosts reserved (" +
                             std::to_string(aliases) + "); raise spare_routes");
      std::vector<sg4::LinkInRoute> sg_links;
      sg_links.reserve(path.size());
      for (LinkId l : path) sg_links.emplace_back(links[l].link);
      zone->add_route(hosts[src][alias]->get_netpoint(), hosts[dst][0]->get_netpoint(), nullptr,
                      nullptr, sg_links, false);
      slots.push_back(path);
    }
    return hosts[src][alias];
  }

  void sync_simgrid_clock() {
    const Time now = engine.now();
    if (now > advanced_to) {
      sg->run_until(sg_time(now));
      advanced_to = now;
    }
  }

  void mark_active(const std::vector<LinkId>& path, int delta, Time at) {
    for (LinkId l : path) {
      LinkState& s = links[l];
      if (delta > 0 && s.active++ == 0) s.busy_since = at;
      if (delta < 0 && --s.active == 0) s.busy_seconds += (at - s.busy_since).seconds();
    }
  }
  void add_carried(const std::vector<LinkId>& path, double bytes) {
    for (LinkId l : path) links[l].bytes_carried += bytes;
  }

  void launch(TransferId id, Transfer& t, double bytes) {
    sync_simgrid_clock();
    sg4::Host* from = source_for(t.src, t.dst, t.path);
    t.comm = sg4::Comm::sendto_async(from, hosts[t.dst][0],
                                     static_cast<std::uint64_t>(std::ceil(bytes)));
    by_comm.emplace(t.comm.get(), id);
  }

  void release_comm(Transfer& t) {
    if (!t.comm) return;
    by_comm.erase(t.comm.get());
    finished_comms.push_back(std::move(t.comm));
    t.comm = nullptr;
  }
};

SimGridNetwork::SimGridNetwork(Engine& engine, const Topology& topology, SimGridOptions options)
    : impl_(std::make_unique<Impl>(engine, topology, options)) {
  SimGridProcess& process = simgrid_process();
  MLSIM_CHECK(process.live == nullptr,
              "only one simgrid network may exist at a time in a process (SimGrid's Engine is a "
              "singleton)");
  if (process.configured && process.model != options.model)
    throw InputError("network.model",
                     std::string("SimGrid fixes its network model once per process: this process "
                                 "already uses ") +
                         model_name(process.model) + ", not " + model_name(options.model));
  Impl& m = *impl_;
  std::vector<std::string> args{"mlsim", "--log=root.thresh:warning"};
  if (!process.configured) {
    args.push_back(std::string("--cfg=network/model:") + model_name(options.model));
    args.push_back("--cfg=network/crosstraffic:0");  // no reverse ACK traffic in the flow models
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  int argc = static_cast<int>(argv.size());
  m.sg = std::make_unique<sg4::Engine>(&argc, argv.data());
  process.configured = true;
  process.model = options.model;
  if (!process.signal_connected) {
    sg4::Activity::on_completion_cb([](const sg4::Activity& activity) {
      if (activity.get_state() != sg4::Activity::State::FINISHED) return;
      if (SimGridNetwork* live = simgrid_process().live) live->on_comm_finished(&activity);
    });
    process.signal_connected = true;
  }

  const std::string prefix = "mlsim" + std::to_string(process.instances++) + "_";
  m.zone = sg4::create_full_zone(prefix + "zone");
  m.aliases = static_cast<int>(std::min<std::uint64_t>(max_equal_cost_paths(topology), 1u << 12)) +
              std::max(0, options.spare_routes);
  m.hosts.resize(topology.nodes().size());
  for (NodeId n = 0; n < topology.nodes().size(); ++n) {
    // Only hosts source transfers along several routes; a switch gets one SimGrid host.
    const int count = topology.node(n).kind == NodeKind::kHost ? m.aliases : 1;
    for (int a = 0; a < count; ++a)
      m.hosts[n].push_back(
          m.zone->create_host(prefix + topology.node(n).name + "#" + std::to_string(a), 1e9));
  }
  m.links.resize(topology.links().size());
  for (LinkId l = 0; l < topology.links().size(); ++l) {
    const Link& link = topology.link(l);
    m.links[l].link =
        m.zone->create_link(prefix + "l" + std::to_string(l), link.bandwidth.bytes_per_s)
            ->set_latency(m.latency_after_sending() ? 0.0 : link.latency.seconds())
            ->seal();
  }
  m.zone->seal();
  m.model = dynamic_cast<simgrid::kernel::resource::Model*>(m.zone->get_network_model());
  MLSIM_CHECK(m.model != nullptr, "SimGrid network model is not a kernel Model");
  m.latency_factor = simgrid::config::get_value<double>("network/latency-factor");
  m.sg_origin = sg4::Engine::get_clock();
  m.engine_origin = engine.now();
  m.advanced_to = engine.now();
  process.live = this;
  engine.add_external_clock(this);
}

SimGridNetwork::~SimGridNetwork() {
  SimGridProcess& process = simgrid_process();
  if (process.live == this) process.live = nullptr;
  for (auto& [id, t] : impl_->transfers)
    if (t.comm) {
      t.comm->cancel();
      impl_->finished_comms.push_back(std::move(t.comm));
    }
  impl_->by_comm.clear();
  impl_->transfers.clear();
  impl_->sg->run_until(sg4::Engine::get_clock());  // lets SimGrid retire the cancelled comms
  impl_->finished_comms.clear();
  impl_->engine.remove_external_clock(this);
}

const SimGridOptions& SimGridNetwork::options() const {
  return impl_->options;
}

TransferId SimGridNetwork::start_transfer(NodeId src, NodeId dst, Bytes bytes,
                                          DeliveryCallback done, std::uint64_t flow_label) {
  Impl& m = *impl_;
  MLSIM_CHECK(src < m.topology.nodes().size() && dst < m.topology.nodes().size(),
              "transfer endpoint out of range");
  MLSIM_CHECK(bytes.count >= 0, "negative transfer size");
  const TransferId id = m.next_id++;
  totals_.count_start(bytes);
  Impl::Transfer& t = m.transfers[id];
  t.src = src;
  t.dst = dst;
  t.bytes = bytes;
  t.started = m.engine.now();
  t.done = std::move(done);
  t.label = flow_label;
  if (src == dst) {
    t.completing = true;
    m.engine.schedule_at(m.engine.now(), [this, id] { finish(id, false); });
    return id;
  }
  t.path = m.route(src, dst, flow_label);
  if (t.path.empty()) {
    fail_at_once(id);
    return id;
  }
  if (bytes.count == 0) {
    // SimGrid 3.32 never starts an empty host-to-host comm: Comm::sendto_async sets the payload
    // size, then the source and the destination, and Comm::set_destination leaves a comm of 0
    // bytes in STARTING ("It cannot start yet", src/s4u/s4u_Comm.cpp), so it would never
    // complete. Nothing is sent, so no link is busy: it arrives after the route's latency, as on
    // the flow and ns-3 backends.
    t.completing = true;
    m.engine.schedule_at(m.empty_arrival(t.path), [this, id] { finish(id, false); });
    return id;
  }
  m.mark_active(t.path, +1, m.engine.now());
  m.launch(id, t, static_cast<double>(bytes.count));
  return id;
}

void SimGridNetwork::on_comm_finished(const void* activity) {
  Impl& m = *impl_;
  auto found = m.by_comm.find(activity);
  if (found == m.by_comm.end()) return;  // not ours (cancelled or from an earlier instance)
  const TransferId id = found->second;
  Impl::Transfer& t = m.transfers.at(id);
  m.release_comm(t);
  m.add_carried(t.path, static_cast<double>(t.bytes.count) - t.sent_on_old_paths);
  const Time sent = std::max(m.engine.now(), m.engine_time(sg4::Engine::get_clock()));
  m.mark_active(t.path, -1, sent);  // the links are free once the last byte left
  const Time at = m.latency_after_sending() ? sent + m.router.latency(t.path) : sent;
  t.completing = true;
  m.engine.schedule_at(at, [this, id] { finish(id, false); });
}

void SimGridNetwork::fail_at_once(TransferId id) {
  impl_->transfers.at(id).completing = true;
  impl_->engine.schedule_at(impl_->engine.now(), [this, id] { finish(id, true); });
}

void SimGridNetwork::finish(TransferId id, bool failed) {
  Impl& m = *impl_;
  auto node = m.transfers.extract(id);
  Impl::Transfer& t = node.mapped();
  totals_.count_end(t.bytes, failed);
  const TransferResult result{id, t.src, t.dst, t.bytes, t.started, m.engine.now(), failed};
  t.done(result);
}

double SimGridNetwork::stop_comm(TransferId id) {
  Impl& m = *impl_;
  Impl::Transfer& t = m.transfers.at(id);
  m.sync_simgrid_clock();
  const double remaining = t.comm->get_remaining();
  const double moved = static_cast<double>(t.bytes.count) - t.sent_on_old_paths - remaining;
  m.add_carried(t.path, moved);
  t.sent_on_old_paths += moved;
  sg4::CommPtr comm = t.comm;
  m.release_comm(t);
  comm->cancel();  // its completion signal (CANCELED) is ignored
  m.mark_active(t.path, -1, m.engine.now());
  return remaining;
}

bool SimGridNetwork::cancel_transfer(TransferId id) {
  Impl& m = *impl_;
  auto it = m.transfers.find(id);
  if (it == m.transfers.end() || it->second.completing) return false;
  if (it->second.comm) stop_comm(id);
  fail_at_once(id);
  return true;
}

void SimGridNetwork::set_link_bandwidth(LinkId link, Bandwidth bw) {
  Impl& m = *impl_;
  MLSIM_CHECK(bw.bytes_per_s > 0, "link bandwidth must be positive (fail the link instead)");
  m.sync_simgrid_clock();
  m.links.at(link).link->set_bandwidth(bw.bytes_per_s);
}

void SimGridNetwork::set_link_latency(LinkId link, Time latency) {
  Impl& m = *impl_;
  // After-sending mode adds the route's latency from the router when the last byte left; the
  // SimGrid link then has none. Otherwise SimGrid pays it, and comms already running keep the
  // value they started with (as in the flow backend).
  m.router.set_link_latency(link, latency);
  if (m.latency_after_sending()) return;
  m.sync_simgrid_clock();
  m.links.at(link).link->set_latency(latency.seconds());
}

void SimGridNetwork::set_link_up(LinkId link, bool up) {
  Impl& m = *impl_;
  m.router.set_link_up(link, up);
  if (up) return;  // transfers keep their routes; new ones may use the link again
  m.sync_simgrid_clock();
  // Transfers still sending across the link move to a new route with the bytes not yet sent;
  // those whose bytes all left are past it (as in the flow backend).
  std::vector<TransferId> crossing;
  for (const auto& [id, t] : m.transfers)
    if (t.comm && std::find(t.path.begin(), t.path.end(), link) != t.path.end())
      crossing.push_back(id);
  std::sort(crossing.begin(), crossing.end());  // deterministic restart order
  for (TransferId id : crossing) {
    Impl::Transfer& t = m.transfers.at(id);
    const double remaining = stop_comm(id);
    t.path = m.route(t.src, t.dst, t.label);
    if (t.path.empty()) {
      fail_at_once(id);
      continue;
    }
    m.mark_active(t.path, +1, m.engine.now());
    m.launch(id, t, remaining);
  }
}

LinkStats SimGridNetwork::link_stats(LinkId link) const {
  const Impl::LinkState& s = impl_->links.at(link);
  LinkStats stats;
  stats.bytes_carried = Bytes{static_cast<std::int64_t>(std::llround(s.bytes_carried))};
  stats.busy_seconds =
      s.busy_seconds + (s.active > 0 ? (impl_->engine.now() - s.busy_since).seconds() : 0.0);
  return stats;
}

Time SimGridNetwork::next_event_time() {
  Impl& m = *impl_;
  if (m.by_comm.empty()) return Time::max();
  // The network model's next date (a completion or a latency ending): asking is idempotent for
  // SimGrid's flow models, which is what its own engine relies on.
  const double now = sg4::Engine::get_clock();
  const double delta = m.model->next_occurring_event(now);
  if (delta < 0) return Time::max();
  Time t = m.engine_time(now + delta);
  // Rounding to whole nanoseconds must never stall: SimGrid always moves forward.
  if (t <= m.advanced_to) t = m.advanced_to + Time::ns(1);
  return std::max(t, m.engine.now());
}

void SimGridNetwork::advance_to(Time t) {
  Impl& m = *impl_;
  if (t <= m.advanced_to || m.by_comm.empty()) return;
  m.sg->run_until(m.sg_time(t));
  m.advanced_to = t;
  m.finished_comms.clear();
}

}  // namespace mlsim
