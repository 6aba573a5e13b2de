#pragma once
// The scenario's `events` section: what changes in the platform during a run, the same for
// every model (docs/scenario.md, "events"):
//   - a link's bandwidth or latency, a link down or up (links named by their two ends, one
//     direction or both; or every link of a node, a switch's uplinks, every link);
//   - a host's compute speed (HostSpeeds);
//   - a node's failure and repair (NodeHealth: its links go down, subscribers are told).
// Events come as a JSON list, a CSV trace of the same kinds, and/or random node failures.
//
// Three steps: the loader reads the section strictly into EventSpecs (names not yet looked up,
// trace read); prepare resolves the names against the built topology into PlatformEvents
// (unknown names are InputErrors); the runner schedules them with schedule_platform_events,
// applying those at time 0 before the model starts. A model that replays the scenario privately
// (commsched's tuners) schedules the same PlatformEvents on its own engine and network.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "sim_core/base/units.hpp"
#include "sim_core/engine/engine.hpp"
#include "sim_core/engine/random.hpp"
#include "sim_core/hardware/host_speeds.hpp"
#include "sim_core/hardware/node_health.hpp"
#include "sim_core/network/link_conditions.hpp"
#include "sim_core/scenario/json_reader.hpp"

namespace mlsim {

enum class EventChange : std::uint8_t { kBandwidth, kLatency, kLinkUp, kSpeed, kNodeUp };

// One event as written, names not yet looked up.
struct EventSpec {
  std::string where;         // JSON path or "file:line", for errors found when resolving
  std::string target_where;  // the target's own JSON path (or "file:line"), for unknown names
  Time at;
  enum class Target : std::uint8_t { kLink, kLinksOf, kUplinksOf, kAllLinks, kHosts, kNodes };
  Target target = Target::kAllLinks;
  // kLink: the two ends; kLinksOf, kUplinksOf: the node; kHosts, kNodes: names, or "#i" for
  // host i; empty with kHosts: every host.
  std::vector<std::string> names;
  bool one_way = false;  // kLink: only the link from names[0] to names[1]
  EventChange change = EventChange::kBandwidth;
  Bandwidth bandwidth;
  Time latency;
  double speed = 1;
  bool up = true;
  std::optional<Time> repair_after;  // kNodeUp with up = false: the repair, this much later
};

// Random failures of every host: each fails after an exponential time (mean `mtbf`), is down
// for `repair`, then draws again; no failure after `until`.
struct RandomFailuresSpec {
  Time mtbf, repair, until;
};

struct EventsSpec {
  std::vector<EventSpec> events;  // the list, then the trace, as written
  std::optional<std::filesystem::path> trace;
  std::optional<RandomFailuresSpec> random_failures;
  bool empty() const { return events.empty() && !random_failures; }
};

// Reads root."events" (absent: no events). `time_limit` bounds random failures when they give no
// `until`. Relative trace paths resolve against `dir`.
EventsSpec read_events_section(JsonReader& root, const std::filesystem::path& dir,
                               std::optional<Time> time_limit);
// The CSV trace alone (columns at,change,target,value; docs/scenario.md).
std::vector<EventSpec> read_events_trace(const std::filesystem::path& file,
                                         const std::string& shown_name);

// For keys the `events` section replaced (system.link_changes, workload.stragglers, ...): an
// InputError at the key naming the new section when the key is present.
void reject_moved_key(JsonReader& section, std::string_view key, std::string_view what);

// One event, resolved.
struct PlatformEvent {
  Time at;
  EventChange change = EventChange::kBandwidth;
  std::vector<LinkId> links;  // link changes
  std::vector<NodeId> nodes;  // speed, node up
  Bandwidth bandwidth;
  Time latency;
  double speed = 1;
  bool up = true;
};

struct PlatformEvents {
  std::vector<PlatformEvent> events;  // ordered by time; ties in the order written
  std::optional<RandomFailuresSpec> random_failures;
  std::vector<NodeId> failure_candidates;  // hosts, for random failures
  bool empty() const { return events.empty() && !random_failures; }
  // Whether any event changes host speeds / fails nodes / changes links.
  bool has(EventChange change) const;
};

// Looks every name up in `topology`; InputError (at the event's path) for unknown names,
// links between nodes that are not neighbours, speeds of switches, and changes `network` cannot
// make (one-way latency on a backend whose cables share one latency).
PlatformEvents resolve_events(const EventsSpec& spec, const Topology& topology,
                              const Network& network);

// What scheduled events act on; all must outlive the engine's events.
struct PlatformState {
  LinkConditions& links;
  HostSpeeds& host_speeds;
  NodeHealth& nodes;
};

// Plays the events on an engine: start() applies those due now at once (so that what the model
// starts at that time sees them) and schedules the rest, and the random failures, drawing from
// `failures`. `events` and the state must outlive the scheduler, which must outlive the engine's
// events. At equal times, events scheduled before the model started run before the model's.
class EventScheduler {
 public:
  EventScheduler(Engine& engine, PlatformState state, const PlatformEvents& events,
                 RandomStream failures);
  EventScheduler(const EventScheduler&) = delete;
  EventScheduler& operator=(const EventScheduler&) = delete;
  void start();

 private:
  void draw_failure(std::size_t candidate);
  void random_failure(std::size_t candidate);

  Engine& engine_;
  PlatformState state_;
  const PlatformEvents& events_;
  RandomStream failures_;
};

// Applies one event now.
void apply_platform_event(const PlatformEvent& e, PlatformState state);

}  // namespace mlsim
