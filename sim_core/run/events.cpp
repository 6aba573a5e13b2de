#include "sim_core/run/events.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>

#include "sim_core/base/error.hpp"
#include "sim_core/base/input_file.hpp"
#include "sim_core/base/text_fields.hpp"

namespace mlsim {
namespace {

constexpr std::string_view kTargets[] = {"link", "links_of", "uplinks_of", "all_links",
                                         "host", "hosts",    "node",       "nodes"};
constexpr std::string_view kChanges[] = {"bandwidth", "latency", "up", "speed"};

bool is_link_target(EventSpec::Target t) {
  return t == EventSpec::Target::kLink || t == EventSpec::Target::kLinksOf ||
         t == EventSpec::Target::kUplinksOf || t == EventSpec::Target::kAllLinks;
}

// A node given as a name or as a host index (stored as "#i").
std::string node_ref(const nlohmann::json& v, const std::string& where) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer() && v.get<std::int64_t>() >= 0)
    return "#" + std::to_string(v.get<std::int64_t>());
  throw InputError(
      where, "expected a node name or a host index (an integer >= 0), got " + json_type_name(v));
}

EventSpec read_event(JsonReader& e) {
  EventSpec x;
  x.where = e.path();
  x.at = e.duration_or("at", "0s");
  std::vector<std::string_view> targets, changes;
  for (auto k : kTargets)
    if (e.has(k)) targets.push_back(k);
  for (auto k : kChanges)
    if (e.has(k)) changes.push_back(k);
  if (targets.size() != 1)
    throw InputError(e.path(),
                     "expected exactly one target: link, links_of, uplinks_of, all_links, host, "
                     "hosts, node or nodes");
  if (changes.size() != 1)
    throw InputError(e.path(), "expected exactly one change: bandwidth, latency, up or speed");
  const std::string_view target = targets[0], change = changes[0];
  x.target_where = e.path_of(target);
  if (target == "link") {
    x.target = EventSpec::Target::kLink;
    x.names = e.strings("link");
    if (x.names.size() != 2)
      throw InputError(e.path_of("link"), "expected the link's two ends: [\"a\", \"b\"]");
    x.one_way = e.choice_or("direction", {"both", "forward"}, "both") == "forward";
  } else if (target == "links_of" || target == "uplinks_of") {
    x.target = target == "links_of" ? EventSpec::Target::kLinksOf : EventSpec::Target::kUplinksOf;
    x.names = {e.string(target)};
  } else if (target == "all_links") {
    x.target = EventSpec::Target::kAllLinks;
    if (!e.boolean("all_links"))
      throw InputError(e.path_of("all_links"), "expected true (or leave the key out)");
  } else {
    const bool hosts = target == "host" || target == "hosts";
    x.target = hosts ? EventSpec::Target::kHosts : EventSpec::Target::kNodes;
    const nlohmann::json& v = e.raw(target);
    const std::string where = e.path_of(target);
    if (target == "host" || target == "node") {
      x.names = {node_ref(v, where)};
    } else if (v.is_string() && v.get<std::string>() == "all" && hosts) {
      // every host: no names
    } else if (v.is_array() && !v.empty()) {
      for (std::size_t i = 0; i < v.size(); ++i)
        x.names.push_back(node_ref(v[i], where + "[" + std::to_string(i) + "]"));
    } else {
      throw InputError(where, hosts ? "expected a non-empty list of host names or indices, or "
                                      "\"all\""
                                    : "expected a non-empty list of node names or host indices");
    }
  }
  if (target != "link" && e.has("direction"))
    throw InputError(e.path_of("direction"), "only for a \"link\" target");
  const bool links = is_link_target(x.target);
  if (change == "bandwidth" || change == "latency") {
    if (!links)
      throw InputError(e.path_of(change),
                       "changes links: give link, links_of, uplinks_of or "
                       "all_links");
    x.change = change == "bandwidth" ? EventChange::kBandwidth : EventChange::kLatency;
    if (change == "bandwidth")
      x.bandwidth = e.bandwidth("bandwidth");
    else
      x.latency = e.duration("latency");
  } else if (change == "speed") {
    if (x.target != EventSpec::Target::kHosts)
      throw InputError(e.path_of("speed"), "changes hosts' compute speed: give host or hosts");
    x.change = EventChange::kSpeed;
    x.speed = e.number("speed", 1e-9, 1e9);
  } else {
    x.up = e.boolean("up");
    x.change = links ? EventChange::kLinkUp : EventChange::kNodeUp;
  }
  if (e.has("repair_after")) {
    if (x.change != EventChange::kNodeUp || x.up)
      throw InputError(e.path_of("repair_after"), "only with a node failure (\"up\": false)");
    x.repair_after = e.duration("repair_after");
  }
  e.finish();
  return x;
}

}  // namespace

std::vector<EventSpec> read_events_trace(const std::filesystem::path& file,
                                         const std::string& shown_name) {
  std::ifstream in = open_input_file(file, shown_name, "events trace");
  std::vector<EventSpec> out;
  std::string line;
  std::size_t number = 0;
  bool header = false;
  while (std::getline(in, line)) {
    ++number;
    const std::string where = fmt::format("{}:{}", shown_name, number);
    if (line.empty() || line == "\r" || line[0] == '#') continue;
    const std::vector<std::string> cells = split_csv_line(line);
    if (!header) {
      if (cells != std::vector<std::string>{"at", "change", "target", "value"})
        throw InputError(where, "expected the header \"at,change,target,value\"");
      header = true;
      continue;
    }
    if (cells.size() != 4)
      throw InputError(where, fmt::format("expected 4 cells, got {}", cells.size()));
    const std::string &change = cells[1], &target = cells[2], &value = cells[3];
    EventSpec x;
    x.where = where;
    x.target_where = where;
    x.at = parse_time(cells[0], where + " (at)");
    if (x.at < Time::zero()) throw InputError(where, "the time must not be negative");
    const bool link_change = change == "bandwidth" || change == "latency" ||
                             change == "link_down" || change == "link_up";
    const bool node_change = change == "speed" || change == "node_down" || change == "node_up";
    if (!link_change && !node_change)
      throw InputError(where, "change \"" + change +
                                  "\" is not one of bandwidth, latency, link_down, link_up, "
                                  "speed, node_down, node_up");
    if (link_change) {
      const auto both = target.find("<>");
      const auto one = target.find('>');
      if (target == "all") {
        x.target = EventSpec::Target::kAllLinks;
      } else if (target.starts_with("links_of:") || target.starts_with("uplinks_of:")) {
        const bool up = target[0] == 'u';
        x.target = up ? EventSpec::Target::kUplinksOf : EventSpec::Target::kLinksOf;
        x.names = {target.substr(target.find(':') + 1)};
      } else if (both != std::string::npos) {
        x.target = EventSpec::Target::kLink;
        x.names = {target.substr(0, both), target.substr(both + 2)};
      } else if (one != std::string::npos) {
        x.target = EventSpec::Target::kLink;
        x.one_way = true;
        x.names = {target.substr(0, one), target.substr(one + 1)};
      } else {
        throw InputError(where, "link target \"" + target +
                                    "\": expected a<>b, a>b, links_of:n, uplinks_of:n or all");
      }
    } else {
      x.target = EventSpec::Target::kHosts;
      if (change != "speed") x.target = EventSpec::Target::kNodes;
      if (target == "all") {
        if (change != "speed") throw InputError(where, "\"all\" only for speed changes");
      } else {
        x.names = {target};
      }
    }
    auto no_value = [&] {
      if (!value.empty()) throw InputError(where, "\"" + change + "\" takes no value");
    };
    if (change == "bandwidth") {
      x.change = EventChange::kBandwidth;
      x.bandwidth = parse_bandwidth(value, where + " (value)");
      if (!(x.bandwidth.bytes_per_s > 0))
        throw InputError(where, "the bandwidth must be positive (use link_down)");
    } else if (change == "latency") {
      x.change = EventChange::kLatency;
      x.latency = parse_time(value, where + " (value)");
      if (x.latency < Time::zero()) throw InputError(where, "the latency must not be negative");
    } else if (change == "link_down" || change == "link_up") {
      no_value();
      x.change = EventChange::kLinkUp;
      x.up = change == "link_up";
    } else if (change == "speed") {
      x.change = EventChange::kSpeed;
      const auto v = parse_finite_number(value);
      if (!v || *v < 1e-9 || *v > 1e9)
        throw InputError(where, "speed \"" + value + "\": expected a number in [1e-9, 1e9]");
      x.speed = *v;
    } else {
      x.change = EventChange::kNodeUp;
      x.up = change == "node_up";
      if (x.up) {
        no_value();
      } else if (!value.empty()) {
        x.repair_after = parse_time(value, where + " (value: repair after)");
        if (*x.repair_after < Time::zero())
          throw InputError(where, "the repair delay must not be negative");
      }
    }
    out.push_back(std::move(x));
  }
  if (!header) throw InputError(shown_name, "the events trace has no header line");
  return out;
}

EventsSpec read_events_section(JsonReader& root, const std::filesystem::path& dir,
                               std::optional<Time> time_limit) {
  EventsSpec s;
  if (!root.has("events")) {
    root.ignore("events");
    return s;
  }
  JsonReader ev = root.object("events");
  for (const char* key : {"list", "trace"})  // known, so that a misspelling lists them
    if (!ev.has(key)) ev.ignore(key);
  if (ev.has("list"))
    for (JsonReader& e : ev.objects("list")) s.events.push_back(read_event(e));
  if (ev.has("trace")) {
    const std::string name = ev.string("trace");
    std::filesystem::path file = name;
    if (file.is_relative()) file = dir / file;
    s.trace = file;
    for (EventSpec& x : read_events_trace(file, ev.path_of("trace") + " (" + name + ")"))
      s.events.push_back(std::move(x));
  }
  if (auto rf = ev.optional_object("random_failures")) {
    RandomFailuresSpec r;
    r.mtbf = rf->duration("mtbf");
    if (r.mtbf <= Time::zero()) throw InputError(rf->path_of("mtbf"), "must be greater than 0");
    r.repair = rf->duration("repair");
    if (rf->has("until")) {
      r.until = rf->duration("until");
    } else if (time_limit) {
      r.until = *time_limit;
      rf->ignore("until");
    } else {
      throw InputError(rf->path_of("until"),
                       "needed when run.time_limit is \"none\": random failures never end on "
                       "their own");
    }
    rf->finish();
    s.random_failures = r;
  }
  ev.finish();
  return s;
}

void reject_moved_key(JsonReader& section, std::string_view key, std::string_view what) {
  if (!section.has(key)) return;
  throw InputError(section.path_of(key),
                   fmt::format("moved: give {} in the scenario's top-level \"events\" section "
                               "(docs/scenario.md, \"Events\")",
                               what));
}

bool PlatformEvents::has(EventChange change) const {
  if (change == EventChange::kNodeUp && random_failures) return true;
  return std::any_of(events.begin(), events.end(),
                     [change](const PlatformEvent& e) { return e.change == change; });
}

namespace {

NodeId find_node(const Topology& t, const std::string& ref, const std::string& where) {
  if (!ref.empty() && ref[0] == '#') {
    const auto i = parse_finite_number(ref.substr(1));
    if (!i || *i < 0 || *i != static_cast<double>(static_cast<std::int64_t>(*i)) ||
        *i >= static_cast<double>(t.hosts().size()))
      throw InputError(where, fmt::format("host index {} is not in 0..{}", ref.substr(1),
                                          t.hosts().size() == 0 ? 0 : t.hosts().size() - 1));
    return t.hosts()[static_cast<std::size_t>(*i)];
  }
  const auto id = t.find(ref);
  if (!id) throw InputError(where, "no node named \"" + ref + "\" in the topology");
  return *id;
}

std::vector<LinkId> links_of(const Topology& t, NodeId n, bool uplinks_only) {
  std::vector<LinkId> out;
  for (LinkId l = 0; l < t.links().size(); ++l) {
    const Link& link = t.link(l);
    if (link.src != n && link.dst != n) continue;
    const NodeId other = link.src == n ? link.dst : link.src;
    if (uplinks_only && t.node(other).kind != NodeKind::kSwitch) continue;
    out.push_back(l);
  }
  return out;
}

}  // namespace

PlatformEvents resolve_events(const EventsSpec& spec, const Topology& topology,
                              const Network& network) {
  PlatformEvents out;
  for (const EventSpec& x : spec.events) {
    PlatformEvent e;
    e.at = x.at;
    e.change = x.change;
    e.bandwidth = x.bandwidth;
    e.latency = x.latency;
    e.speed = x.speed;
    e.up = x.up;
    switch (x.target) {
      case EventSpec::Target::kLink: {
        const NodeId a = find_node(topology, x.names[0], x.target_where);
        const NodeId b = find_node(topology, x.names[1], x.target_where);
        for (LinkId l : links_between(topology, a, b))
          if (!x.one_way || topology.link(l).src == a) e.links.push_back(l);
        if (e.links.empty())
          throw InputError(x.target_where,
                           "\"" + x.names[0] + "\" and \"" + x.names[1] + "\" are not linked");
        break;
      }
      case EventSpec::Target::kLinksOf:
      case EventSpec::Target::kUplinksOf: {
        const bool up = x.target == EventSpec::Target::kUplinksOf;
        const NodeId n = find_node(topology, x.names[0], x.target_where);
        e.links = links_of(topology, n, up);
        if (e.links.empty())
          throw InputError(x.target_where,
                           "\"" + x.names[0] + "\" has no " + (up ? "links to a switch" : "links"));
        break;
      }
      case EventSpec::Target::kAllLinks:
        for (LinkId l = 0; l < topology.links().size(); ++l) e.links.push_back(l);
        if (e.links.empty()) throw InputError(x.where, "the topology has no links");
        break;
      case EventSpec::Target::kHosts:
      case EventSpec::Target::kNodes:
        if (x.names.empty()) e.nodes = topology.hosts();
        for (const std::string& name : x.names) {
          const NodeId n = find_node(topology, name, x.target_where);
          if (x.target == EventSpec::Target::kHosts && topology.node(n).kind != NodeKind::kHost)
            throw InputError(x.target_where, "\"" + name + "\" is a switch, not a host");
          e.nodes.push_back(n);
        }
        break;
    }
    if (e.change == EventChange::kLatency && !network.latency_per_direction())
      for (LinkId l : e.links) {
        const Link& link = topology.link(l);
        const bool reverse = std::any_of(e.links.begin(), e.links.end(), [&](LinkId r) {
          return topology.link(r).src == link.dst && topology.link(r).dst == link.src;
        });
        if (!reverse)
          throw InputError(x.where, fmt::format("the {} backend changes a cable's latency in "
                                                "both directions at once: change both",
                                                network.backend_name()));
      }
    const bool repair = x.repair_after.has_value();
    out.events.push_back(e);
    if (repair) {
      if (*x.repair_after > Time::max() - x.at)
        throw InputError(x.where, "the repair falls beyond the simulator's time range");
      PlatformEvent r = e;
      r.at = x.at + *x.repair_after;
      r.up = true;
      out.events.push_back(std::move(r));
    }
  }
  std::stable_sort(out.events.begin(), out.events.end(),
                   [](const PlatformEvent& a, const PlatformEvent& b) { return a.at < b.at; });
  out.random_failures = spec.random_failures;
  if (out.random_failures) out.failure_candidates = topology.hosts();
  return out;
}

void apply_platform_event(const PlatformEvent& e, PlatformState state) {
  switch (e.change) {
    case EventChange::kBandwidth:
      state.links.set_bandwidth(e.links, e.bandwidth);
      break;
    case EventChange::kLatency:
      state.links.set_latency(e.links, e.latency);
      break;
    case EventChange::kLinkUp:
      state.links.set_link_up(e.links, e.up);
      break;
    case EventChange::kSpeed:
      for (NodeId n : e.nodes) state.host_speeds.set_speed(n, e.speed);
      break;
    case EventChange::kNodeUp:
      // The network first, so that listeners see the node's links in their new state.
      for (NodeId n : e.nodes) {
        state.links.set_node_up(n, e.up);
        state.nodes.set_up(n, e.up);
      }
      break;
  }
}

EventScheduler::EventScheduler(Engine& engine, PlatformState state, const PlatformEvents& events,
                               RandomStream failures)
    : engine_(engine), state_(state), events_(events), failures_(std::move(failures)) {}

void EventScheduler::start() {
  for (std::size_t i = 0; i < events_.events.size(); ++i) {
    const PlatformEvent& e = events_.events[i];
    if (e.at <= engine_.now())
      apply_platform_event(e, state_);
    else
      engine_.schedule_at(e.at, [this, i] { apply_platform_event(events_.events[i], state_); });
  }
  if (events_.random_failures)
    for (std::size_t c = 0; c < events_.failure_candidates.size(); ++c) draw_failure(c);
}

void EventScheduler::draw_failure(std::size_t candidate) {
  const RandomFailuresSpec& r = *events_.random_failures;
  const double delay = failures_.exponential(1.0 / r.mtbf.seconds());
  if (delay >= (r.until - engine_.now()).seconds()) return;
  engine_.schedule_at(engine_.now() + Time::from_seconds(delay),
                      [this, candidate] { random_failure(candidate); });
}

void EventScheduler::random_failure(std::size_t candidate) {
  const NodeId n = events_.failure_candidates[candidate];
  if (!state_.nodes.up(n)) {  // down already (another event): this failure is moot
    draw_failure(candidate);
    return;
  }
  state_.links.set_node_up(n, false);
  state_.nodes.set_up(n, false);
  engine_.schedule_in(events_.random_failures->repair, [this, candidate, n] {
    state_.links.set_node_up(n, true);
    state_.nodes.set_up(n, true);
    draw_failure(candidate);
  });
}

}  // namespace mlsim
