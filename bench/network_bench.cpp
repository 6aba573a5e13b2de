// Many concurrent flows sharing links: mlsim's flow backend against SimGrid 3.32's LV08 model,
// side by side in one binary, with the same traffic and the same allocations.
//
// Traffic: N flows (1k, 10k, 30k; 100 in the smoke run) are kept running at once, closed loop:
// each delivery starts a new flow in the same group of hosts. Sizes are drawn uniformly in
// [1, 2] MB from a fixed seed per group. Within a group, the first half of the hosts send to the
// second half, pairs rotating so that every link is shared by many flows. Three patterns:
//   - star:   one group of 64 hosts on a star (10 Gb/s, 1 us links). Every flow shares a link
//             with others, so all N flows form ONE max-min component and every start or end
//             re-solves all of them (in both backends): the worst case.
//   - groups: 256 groups of 4 hosts on one 1024-host star: flows of different groups share no
//             link, so the flows form 256 components of about N/256 flows each, and a start or
//             end re-solves only its group (the case of many independent jobs or racks).
//   - incast: 64 hosts of a 65-host star send to the 65th (the exception to the halves): one
//             component with ONE bottleneck, the receiver's downlink, that every flow crosses
//             (N/64 flows per uplink, N on the downlink), so every flow has the same rate; the
//             case a single-bottleneck fast path would take (docs/plans/flow_fast_path.md).
// The first W completions are a warm-up; then M completions are timed (wall and CPU seconds of
// the process). M is smaller for SimGrid where it is slow; rates are per completion.
//
// Identical allocations: LV08 scales link bandwidth by 0.97 and weights shares by route
// latency plus 20537 B / bandwidth per link. Every route here has two equal links, so all
// weights are equal and LV08's shares are max-min shares of 0.97 x the bandwidth; SimGrid runs
// with latency paid after sending (as the flow backend), and the flow backend runs on links of
// 0.97 x the bandwidth. Both then compute the same allocation at every instant; the table after
// the runs compares the simulated time of the same completion (number W + M of SimGrid's run).
//
// Rounds: MLSIM_BENCH_ROUNDS=R (1..100, default 1) runs every case R times, round r of each
// backend of a case before round r + 1 (so a flow run and the SimGrid run next to it see about
// the same load), and the tables give the median rate of each backend over the rounds, the ratio
// of those medians, and the CPU ratio of each round. Every round must reach the same check
// completion time (the table says ROUNDS DIFFER otherwise).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "sim_core/network/fluid_network.hpp"
#include "sim_core/network/simgrid/simgrid_network.hpp"
#include "sim_core/network/topology_builders.hpp"

namespace {

using namespace mlsim;

constexpr double kLinkBytesPerS = 1.25e9;
constexpr double kLv08BandwidthFactor = 0.97;  // SimGrid 3.32 network/bandwidth-factor for LV08

struct Pattern {
  const char* name;
  int groups;
  int hosts_per_group;
  bool incast = false;  // every host of the group but the last sends to the last
};
constexpr Pattern kStar{"star", 1, 64};
constexpr Pattern kGroups{"groups", 256, 4};
constexpr Pattern kIncast{"incast", 1, 65, true};

// Deterministic sizes (splitmix64), identical for both backends.
class Sizes {
 public:
  explicit Sizes(std::uint64_t seed) : state_(seed) {}
  Bytes next() {
    state_ += 0x9e3779b97f4a7c15ULL;
    std::uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return Bytes{1'000'000 + static_cast<std::int64_t>(z % 1'000'001)};
  }

 private:
  std::uint64_t state_;
};

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}
double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Window {
  std::int64_t warmup = 0, measured = 0, check_at = 0;  // completion counts
};

struct RunResult {
  double wall_seconds = 0, cpu_seconds = 0;
  std::int64_t measured = 0;
  double check_sim_seconds = 0;  // simulated time of completion number check_at
  std::int64_t check_at = 0;
};

// Keeps `concurrent` flows running; times completions warmup+1 .. warmup+measured, then stops.
class ClosedLoop {
 public:
  ClosedLoop(Engine& engine, Network& net, const Topology& topo, Pattern pattern,
             std::int64_t concurrent, Window window, RunResult& out)
      : engine_(engine),
        net_(net),
        hosts_(topo.hosts()),
        pattern_(pattern),
        window_(window),
        out_(out),
        started_(static_cast<std::size_t>(pattern.groups), 0) {
    for (int g = 0; g < pattern.groups; ++g) sizes_.emplace_back(42 + 1000 * g);
    if (window_.warmup == 0) begin();
    for (std::int64_t i = 0; i < concurrent; ++i) start(static_cast<int>(i % pattern.groups));
  }
  std::int64_t completed() const { return completed_; }

 private:
  void begin() {
    wall_ = wall_seconds();
    cpu_ = cpu_seconds();
  }

  void start(int group) {
    const std::int64_t k = started_[static_cast<std::size_t>(group)]++;
    const int half = pattern_.hosts_per_group / 2;
    const int base = group * pattern_.hosts_per_group;
    const int senders = pattern_.incast ? pattern_.hosts_per_group - 1 : half;
    const auto src = static_cast<std::size_t>(base + k % senders);
    const auto dst = static_cast<std::size_t>(
        pattern_.incast ? base + senders : base + half + (k * 7 + k / 32) % half);
    net_.start_transfer(hosts_[src], hosts_[dst], sizes_[static_cast<std::size_t>(group)].next(),
                        [this, group](const TransferResult& r) { on_done(group, r); });
  }

  void on_done(int group, const TransferResult& r) {
    ++completed_;
    if (completed_ == window_.check_at) out_.check_sim_seconds = r.finished.seconds();
    if (completed_ == window_.warmup) begin();
    if (completed_ == window_.warmup + window_.measured) {
      out_.wall_seconds = wall_seconds() - wall_;
      out_.cpu_seconds = cpu_seconds() - cpu_;
      out_.measured = window_.measured;
      out_.check_at = window_.check_at;
      engine_.stop();
      return;
    }
    start(group);
  }

  Engine& engine_;
  Network& net_;
  const std::vector<NodeId>& hosts_;
  Pattern pattern_;
  Window window_;
  RunResult& out_;
  std::vector<std::int64_t> started_;
  std::vector<Sizes> sizes_;
  std::int64_t completed_ = 0;
  double wall_ = 0, cpu_ = 0;
};

Topology star(const Pattern& p, double bandwidth_factor) {
  return build_topology(
      StarSpec{p.groups * p.hosts_per_group,
               LinkSpec{Bandwidth{kLinkBytesPerS * bandwidth_factor}, Time::us(1)}});
}

template <typename MakeNetwork>
void run_closed_loop(benchmark::State& state, const Topology& topo, Pattern pattern,
                     std::int64_t concurrent, Window window, MakeNetwork make, RunResult& out) {
  for (auto _ : state) {
    out = RunResult{};
    try {
      Engine engine;
      std::unique_ptr<Network> net = make(engine, topo);
      ClosedLoop loop(engine, *net, topo, pattern, concurrent, window, out);
      engine.run();
      if (loop.completed() != window.warmup + window.measured)
        state.SkipWithError("the loop stopped early");
      if (const auto* fluid = dynamic_cast<const FluidNetwork*>(net.get())) {
        // How much of the component each solve took on (route classes and lone transfers).
        const auto& st = fluid->solve_stats();
        state.counters["solved_per_solve"] =
            static_cast<double>(st.solved) /
            static_cast<double>(std::max<std::uint64_t>(1, st.solves));
        // Solves that restarted the last one's filling instead of gathering the component.
        state.counters["restart_share"] =
            static_cast<double>(st.restarted) /
            static_cast<double>(std::max<std::uint64_t>(1, st.solves));
        // In-place fillings of one step (one link froze all they solved): where a
        // single-bottleneck fast path would run (docs/plans/flow_fast_path.md).
        state.counters["one_step_share"] =
            static_cast<double>(st.one_step) /
            static_cast<double>(std::max<std::uint64_t>(1, st.solves));
        state.counters["partial_share"] =
            static_cast<double>(st.partial) /
            static_cast<double>(std::max<std::uint64_t>(1, st.solves));
        // Route classes that entered a rate group (new, or bottleneck changed) and groups
        // re-rated in place, per solve.
        state.counters["group_entries_per_solve"] =
            static_cast<double>(st.group_entries) /
            static_cast<double>(std::max<std::uint64_t>(1, st.solves));
        state.counters["group_rerates_per_solve"] =
            static_cast<double>(st.group_rate_changes) /
            static_cast<double>(std::max<std::uint64_t>(1, st.solves));
      }
    } catch (const std::exception& e) {  // report the failure, run the other benchmarks
      out = RunResult{};
      state.SkipWithError(e.what());
      state.SetIterationTime(1e-9);
      return;
    }
    state.SetIterationTime(out.wall_seconds);
  }
  state.SetItemsProcessed(state.iterations() * window.measured);
  state.counters["per_cpu_s"] = static_cast<double>(out.measured) / out.cpu_seconds;
  state.counters["check_sim_s"] = out.check_sim_seconds;
}

// Medians over the rounds of a case (one RunResult per round).
double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
double median_rate(const std::vector<RunResult>& runs, bool cpu) {
  std::vector<double> rates;
  for (const RunResult& r : runs)
    if (r.measured > 0)
      rates.push_back(static_cast<double>(r.measured) / (cpu ? r.cpu_seconds : r.wall_seconds));
  return median(rates);
}
// The first round that ran, or nullptr; every round runs the same simulation (the check
// completion's time is the same in each, which main() checks).
const RunResult* first_run(const std::vector<RunResult>& runs) {
  for (const RunResult& r : runs)
    if (r.measured > 0) return &r;
  return nullptr;
}
bool same_checks(const std::vector<RunResult>& runs) {
  const RunResult* first = first_run(runs);
  for (const RunResult& r : runs)
    if (r.measured > 0 && r.check_sim_seconds != first->check_sim_seconds) return false;
  return true;
}

struct Case {
  Pattern pattern;
  std::int64_t concurrent;
  std::int64_t flow_measured, simgrid_measured;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  constexpr std::int64_t kWarmup = 100;
  // MLSIM_BENCH_ROUNDS=R runs each case R times, its flow and SimGrid runs in turns (round r of
  // every backend of a case before round r + 1), so that both see the same load; the tables give
  // medians over the rounds and the ratio of the medians. Default 1.
  int rounds = 1;
  if (const char* env = std::getenv("MLSIM_BENCH_ROUNDS")) {
    rounds = std::atoi(env);
    if (rounds < 1 || rounds > 100) {
      std::fprintf(stderr, "MLSIM_BENCH_ROUNDS must be 1..100, got '%s'\n", env);
      return 2;
    }
  }
  // SimGrid's cost per completion grows with the component; its windows keep it to about a
  // minute in all (measured 2026-12-03 on the 2-core machine).
  const std::vector<Case> cases = {
      {kStar, 100, 200, 200},          {kStar, 1'000, 2'000, 1'000},
      {kStar, 10'000, 2'000, 200},     {kStar, 30'000, 2'000, 60},
      {kGroups, 100, 200, 200},        {kGroups, 1'000, 5'000, 2'000},
      {kGroups, 10'000, 5'000, 2'000}, {kGroups, 30'000, 5'000, 2'000},
      {kIncast, 1'000, 2'000, 1'000},  {kIncast, 10'000, 2'000, 200},
  };
  using Key = std::tuple<std::string, std::int64_t>;
  std::map<Key, std::vector<RunResult>> flow, simgrid, per_transfer;
  // Each round writes its own RunResult (sized before any benchmark runs: references stay valid).
  for (const Case& c : cases) {
    const Key key{c.pattern.name, c.concurrent};
    flow[key].resize(static_cast<std::size_t>(rounds));
    simgrid[key].resize(static_cast<std::size_t>(rounds));
    if (c.pattern.groups > 1 || c.concurrent <= 1'000)
      per_transfer[key].resize(static_cast<std::size_t>(rounds));
  }
  std::map<std::string, Topology> flow_topo, simgrid_topo;
  for (const Pattern& p : {kStar, kGroups, kIncast}) {
    flow_topo.emplace(p.name, star(p, kLv08BandwidthFactor));
    simgrid_topo.emplace(p.name, star(p, 1.0));
  }
  // One flow-backend case, with or without route classes; the result goes to `out`.
  auto register_flow = [&](const std::string& name, const Case& c, Window window,
                           bool route_classes, RunResult& out) {
    benchmark::RegisterBenchmark(
        name.c_str(),
        [&flow_topo, &out, c, window, route_classes](benchmark::State& s) {
          run_closed_loop(
              s, flow_topo.at(c.pattern.name), c.pattern, c.concurrent, window,
              [route_classes](Engine& e, const Topology& t) {
                return std::make_unique<FluidNetwork>(e, t, Sharing::kMaxMin, route_classes);
              },
              out);
        })
        ->Iterations(1)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  };
  for (const Case& c : cases)
    for (int round = 0; round < rounds; ++round) {
      const auto r = static_cast<std::size_t>(round);
      const Window flow_window{kWarmup, c.flow_measured, kWarmup + c.simgrid_measured};
      const Window simgrid_window{kWarmup, c.simgrid_measured, kWarmup + c.simgrid_measured};
      const Key key{c.pattern.name, c.concurrent};
      // Benchmarks whose name has "Small" are the smoke run (tools/test.sh).
      const std::string suffix = std::string("/") + c.pattern.name + "/" +
                                 std::to_string(c.concurrent) +
                                 (c.concurrent <= 100 ? "/Small" : "") +
                                 (rounds > 1 ? "/round:" + std::to_string(round) : "");
      register_flow("BM_FlowBackend" + suffix, c, flow_window, /*route_classes=*/true,
                    flow[key][r]);
      // The flow backend without route classes (the scenarios' default), where it takes under a
      // minute: the groups cases must not be slower with route classes.
      if (c.pattern.groups > 1 || c.concurrent <= 1'000)
        register_flow("BM_FlowPerTransfer" + suffix, c, flow_window, /*route_classes=*/false,
                      per_transfer[key][r]);
      benchmark::RegisterBenchmark(
          ("BM_SimGridLV08" + suffix).c_str(),
          [&, c, key, r, simgrid_window](benchmark::State& s) {
            run_closed_loop(
                s, simgrid_topo.at(c.pattern.name), c.pattern, c.concurrent, simgrid_window,
                [](Engine& e, const Topology& t) {
                  SimGridOptions o;
                  o.model = SimGridOptions::Model::kLV08;
                  o.latency = SimGridOptions::Latency::kAfterSending;
                  o.spare_routes = 0;  // no failures here; keeps SimGrid's routing table small
                  return std::make_unique<SimGridNetwork>(e, t, o);
                },
                simgrid[key][r]);
          })
          ->Iterations(1)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();

  // Medians over the rounds (1 unless MLSIM_BENCH_ROUNDS); ratios are ratios of the medians.
  std::printf(
      "\nflow backend, completed transfers per CPU second (median of %d): route classes | per "
      "transfer\n",
      rounds);
  for (const auto& [key, f] : flow) {
    auto it = per_transfer.find(key);
    if (it == per_transfer.end()) continue;
    const RunResult* f0 = first_run(f);
    const RunResult* p0 = first_run(it->second);
    if (f0 == nullptr || p0 == nullptr) continue;
    const double fc = median_rate(f, true), pc = median_rate(it->second, true);
    std::printf("%-7s %-10lld %10.0f | %-10.0f (%.2fx)  #%lld: %.9f s vs %.9f s%s\n",
                std::get<0>(key).c_str(), static_cast<long long>(std::get<1>(key)), fc, pc, fc / pc,
                static_cast<long long>(f0->check_at), f0->check_sim_seconds, p0->check_sim_seconds,
                same_checks(f) && same_checks(it->second) ? "" : "  ROUNDS DIFFER");
  }
  std::printf(
      "\ncompleted transfers per second, median of %d (wall | CPU); speedup = flow / simgrid "
      "(ratio of the medians)\n"
      "%-7s %-10s %-22s %-22s %-17s %s\n",
      rounds, "pattern", "concurrent", "flow backend", "SimGrid LV08", "speedup",
      "same completion, sim time");
  for (const auto& [key, f] : flow) {
    auto it = simgrid.find(key);
    if (it == simgrid.end()) continue;
    const RunResult* f0 = first_run(f);
    const RunResult* g0 = first_run(it->second);
    if (f0 == nullptr || g0 == nullptr) continue;
    const double fw = median_rate(f, false), fc = median_rate(f, true);
    const double gw = median_rate(it->second, false), gc = median_rate(it->second, true);
    // The same completion (SimGrid's last timed one) in both backends.
    std::printf(
        "%-7s %-10lld %9.0f | %-9.0f  %9.1f | %-9.1f  %6.1fx | %5.1fx   #%lld: %.9f s vs %.9f s "
        "(rel. diff %.1e)%s\n",
        std::get<0>(key).c_str(), static_cast<long long>(std::get<1>(key)), fw, fc, gw, gc, fw / gw,
        fc / gc, static_cast<long long>(g0->check_at), f0->check_sim_seconds, g0->check_sim_seconds,
        std::abs(f0->check_sim_seconds - g0->check_sim_seconds) / g0->check_sim_seconds,
        same_checks(f) && same_checks(it->second) ? "" : "  ROUNDS DIFFER");
  }
  if (rounds > 1) {  // the spread behind each median: CPU ratio per round, in run order
    std::printf("\nCPU speedup per round (flow / SimGrid of the same round)\n");
    for (const auto& [key, f] : flow) {
      auto it = simgrid.find(key);
      if (it == simgrid.end() || first_run(f) == nullptr) continue;
      std::printf("%-7s %-10lld", std::get<0>(key).c_str(),
                  static_cast<long long>(std::get<1>(key)));
      for (std::size_t r = 0; r < f.size(); ++r)
        if (f[r].measured > 0 && it->second[r].measured > 0)
          std::printf(" %.1fx", (static_cast<double>(f[r].measured) / f[r].cpu_seconds) /
                                    (static_cast<double>(it->second[r].measured) /
                                     it->second[r].cpu_seconds));
      std::printf("\n");
    }
  }
  return 0;
}
