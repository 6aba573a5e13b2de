// The scenario's `events` section end to end: read strictly, resolved against the topology,
// scheduled by the runner, applied through LinkConditions, HostSpeeds and NodeHealth, and seen by
// models. Times are computed by hand in the comments.
#include <gtest/gtest.h>

#include "sim_core/run/events.hpp"
#include "tests/support/run_json.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mlsim;
using nlohmann::json;

namespace {

// Sends one transfer of `bytes` from host 0 to host 1 at the start.
class Sender : public Model {
 public:
  explicit Sender(Bytes bytes) : bytes_(bytes) {}
  void start(ModelEnv& env) override {
    env.network.start_transfer(env.topology.hosts()[0], env.topology.hosts()[1], bytes_,
                               [this](const TransferResult& r) {
                                 end_ = r.finished;
                                 failed_ = r.failed;
                               });
  }
  void finish(ModelEnv&, Results& out) override {
    out.set_metric("end_s", end_.seconds());
    out.set_metric("failed", failed_ ? 1 : 0);
  }

 private:
  Bytes bytes_;
  Time end_;
  bool failed_ = false;
};

// Runs `ops` ops of 1 s of nominal work one after the other on host 0; an op's time is fixed
// when it starts: 1 s / the host's speed then.
class Worker : public Model {
 public:
  explicit Worker(int ops) : ops_(ops) {}
  void start(ModelEnv& env) override {
    env_ = &env;
    next();
  }
  void finish(ModelEnv&, Results& out) override {
    out.set_metric("end_s", end_.seconds());
    out.set_metric("speed_changes_heard", heard_);
  }

 private:
  void next() {
    if (done_ == ops_) {
      end_ = env_->engine.now();
      return;
    }
    if (done_ == 0) env_->host_speeds.on_change([this](NodeId, double, double) { ++heard_; });
    ++done_;
    const double speed = env_->host_speeds.speed(env_->topology.hosts()[0]);
    env_->engine.schedule_in(Time::from_seconds(1.0 / speed), [this] { next(); });
  }
  ModelEnv* env_ = nullptr;
  int ops_, done_ = 0, heard_ = 0;
  Time end_;
};

// Subscribes to failures and repairs; records what it hears, and whether the node's links were
// already down (up) when it heard.
class Watcher : public Model {
 public:
  void start(ModelEnv& env) override {
    env.nodes.on_change([this, &env](NodeId node, bool up) {
      const LinkId first = env.topology.out_links(node)[0];
      heard_.push_back({{"at_s", env.engine.now().seconds()},
                        {"node", env.topology.node(node).name},
                        {"up", up},
                        {"link_up", env.links.up(first)}});
    });
  }
  void finish(ModelEnv& env, Results& out) override {
    out.details()["heard"] = heard_;
    out.set_metric("failures", static_cast<double>(env.nodes.failures()));
  }

 private:
  json heard_ = json::array();
};

Registries registries() {
  return test::registries_with([](ModelRegistry& r) {
    auto add = [&r](std::string name, std::function<std::unique_ptr<Model>(JsonReader&)> make) {
      r.add(ModelInfo{name, "test model", {}, [make](ModelSetup& setup) {
                        JsonReader system = setup.root.object("system");
                        system.ignore("model");
                        auto m = make(system);
                        system.finish();
                        return m;
                      }});
    };
    add("sender", [](JsonReader& s) { return std::make_unique<Sender>(s.bytes("bytes")); });
    add("worker", [](JsonReader& s) {
      return std::make_unique<Worker>(static_cast<int>(s.integer("ops", 1, 100)));
    });
    add("watcher", [](JsonReader&) { return std::make_unique<Watcher>(); });
  });
}

// Two hosts on one switch, 8 Gbps (1 GB/s) links of 1 us.
json scenario(json system, json events) {
  json doc = {
      {"name", "events_test"},
      {"topology",
       {{"kind", "star"}, {"hosts", 2}, {"link", {{"bandwidth", "8Gbps"}, {"latency", "1us"}}}}},
      {"network", {{"backend", "flow"}}},
      {"system", std::move(system)}};
  if (!events.is_null()) doc["events"] = std::move(events);
  return doc;
}

double metric(const RunOutput& r, const std::string& name) {
  return r.results.metrics().at(name);
}

}  // namespace

TEST(Events, LinkBandwidthHalvedMidTransferOnTheFlowBackend) {
  // 1 GB from h0 to h1 over two 1 GB/s links. At 0.5 s h0's uplink drops to 0.5 GB/s: 0.5 GB are
  // sent, the other 0.5 GB take 1 s more; the last byte leaves at 1.5 s and arrives after the two
  // hops' latency: 1.5 s + 2 us.
  const Registries reg = registries();
  const json events = json::parse(
      R"({"list": [{"at": "500ms", "link": ["h0", "sw0"], "direction": "forward",
                    "bandwidth": "4Gbps"}]})");
  const RunOutput r =
      test::run_json(scenario({{"model", "sender"}, {"bytes", "1GB"}}, events), reg);
  EXPECT_DOUBLE_EQ(metric(r, "end_s"), 1.5 + 2e-6);
  // Without the event: 1 s + 2 us.
  const RunOutput plain =
      test::run_json(scenario({{"model", "sender"}, {"bytes", "1GB"}}, {}), reg);
  EXPECT_DOUBLE_EQ(metric(plain, "end_s"), 1.0 + 2e-6);
  // The reverse direction (sw0 -> h0) is untouched, so the one-way change matters: slowing
  // only h1's uplink (not on the path) changes nothing.
  const json other = json::parse(
      R"({"list": [{"at": "500ms", "link": ["h1", "sw0"], "direction": "forward",
                    "bandwidth": "4Gbps"}]})");
  EXPECT_DOUBLE_EQ(
      metric(test::run_json(scenario({{"model", "sender"}, {"bytes", "1GB"}}, other), reg),
             "end_s"),
      1.0 + 2e-6);
}

TEST(Events, LatencyChangeAppliesToTransfersStartedAfterIt) {
  // At 0 s every link's latency becomes 1 ms: 1 MB takes 1 ms to send, plus 2 x 1 ms of hops.
  const Registries reg = registries();
  const json events = json::parse(R"({"list": [{"all_links": true, "latency": "1ms"}]})");
  const RunOutput r =
      test::run_json(scenario({{"model", "sender"}, {"bytes", "1MB"}}, events), reg);
  EXPECT_DOUBLE_EQ(metric(r, "end_s"), 1e-3 + 2e-3);
}

TEST(Events, HostSpeedChangeIsSeenByTheModel) {
  // Three ops of 1 s nominal. At 1.5 s host 0 drops to half speed: op 1 [0, 1], op 2 [1, 2]
  // (started before the change), op 3 [2, 4] (1 s / 0.5).
  const Registries reg = registries();
  const json events = json::parse(R"({"list": [{"at": "1.5s", "host": 0, "speed": 0.5}]})");
  const RunOutput r = test::run_json(scenario({{"model", "worker"}, {"ops", 3}}, events), reg);
  EXPECT_DOUBLE_EQ(metric(r, "end_s"), 4.0);
  EXPECT_DOUBLE_EQ(metric(r, "speed_changes_heard"), 1);
  // At 0 s the change is in place before the model starts: 3 x 1 s / 2 = 1.5 s (by name this
  // time).
  const json initial = json::parse(R"({"list": [{"hosts": ["h0"], "speed": 2}]})");
  EXPECT_DOUBLE_EQ(
      metric(test::run_json(scenario({{"model", "worker"}, {"ops", 3}}, initial), reg), "end_s"),
      1.5);
}

TEST(Events, NodeFailureAndRepairNotifySubscribersAfterTheLinks) {
  // h1 fails at 1 s and is repaired 2 s later: the watcher hears (1 s, down) with h1's link
  // already down, then (3 s, up) with it back up. A transfer to h1 during the failure fails.
  const Registries reg = registries();
  const json events =
      json::parse(R"({"list": [{"at": "1s", "node": "h1", "up": false, "repair_after": "2s"}]})");
  const RunOutput r = test::run_json(scenario({{"model", "watcher"}}, events), reg);
  const json& heard = r.results.details()["heard"];
  ASSERT_EQ(heard.size(), 2u);
  EXPECT_EQ(heard[0], json({{"at_s", 1.0}, {"node", "h1"}, {"up", false}, {"link_up", false}}));
  EXPECT_EQ(heard[1], json({{"at_s", 3.0}, {"node", "h1"}, {"up", true}, {"link_up", true}}));
  EXPECT_DOUBLE_EQ(metric(r, "failures"), 1);
  // The run lasts until the last event.
  EXPECT_EQ(r.info.simulated_time, Time::s(3));

  const json down = json::parse(R"({"list": [{"node": "h1", "up": false}]})");
  const RunOutput cut =
      test::run_json(scenario({{"model", "sender"}, {"bytes", "1MB"}}, down), reg);
  EXPECT_DOUBLE_EQ(metric(cut, "failed"), 1);
}

TEST(Events, ReadFromATrace) {
  // The trace halves h0's uplink at 0.5 s (as the first test) and slows nothing else: 1.5 s + 2 us.
  mlsim::testing::TempDir dir;
  dir.write("events.csv",
            "# comment\nat,change,target,value\n500ms,bandwidth,h0>sw0,4Gbps\n\n"
            "2s,node_down,h1,1s\n");
  const Registries reg = registries();
  const RunOutput r =
      test::run_json(scenario({{"model", "sender"}, {"bytes", "1GB"}}, {{"trace", "events.csv"}}),
                     reg, dir.path() / "scenario.json");
  EXPECT_DOUBLE_EQ(metric(r, "end_s"), 1.5 + 2e-6);
  EXPECT_EQ(r.info.simulated_time, Time::s(3));  // the failure at 2 s, its repair at 3 s
  const RunOutput w = test::run_json(scenario({{"model", "watcher"}}, {{"trace", "events.csv"}}),
                                     reg, dir.path() / "scenario.json");
  EXPECT_EQ(w.results.details()["heard"].size(), 2u);
}

TEST(Events, RandomFailuresAreBoundedAndReproducible) {
  // Mean 1 s between failures of each of 2 hosts, 0.1 s down, none after 20 s: about 2 x 20 /
  // 1.1 = 36 failures; the same seed gives the same sequence.
  const Registries reg = registries();
  const json events =
      json::parse(R"({"random_failures": {"mtbf": "1s", "repair": "100ms", "until": "20s"}})");
  const RunOutput a = test::run_json(scenario({{"model", "watcher"}}, events), reg);
  const RunOutput b = test::run_json(scenario({{"model", "watcher"}}, events), reg);
  EXPECT_EQ(a.results.details(), b.results.details());
  EXPECT_GT(metric(a, "failures"), 15);
  EXPECT_LT(metric(a, "failures"), 70);
  for (const json& h : a.results.details()["heard"]) EXPECT_LE(h["at_s"].get<double>(), 20.1);
}

TEST(Events, ErrorsNameThePath) {
  const Registries reg = registries();
  auto error = [&](const std::string& events) {
    return test::prepare_error(scenario({{"model", "watcher"}}, json::parse(events)), reg);
  };
  auto expect = [&](const std::string& events, const std::string& part) {
    const std::string e = error(events);
    EXPECT_NE(e.find(part), std::string::npos) << events << " -> " << e;
  };
  expect(R"({"list": [{"link": ["h0", "nowhere"], "up": false}]})",
         "events.list[0].link: no node named \"nowhere\"");
  expect(R"({"list": [{"link": ["h0", "h1"], "up": false}]})", "are not linked");
  expect(R"({"list": [{"host": "sw0", "speed": 2}]})", "events.list[0].host: \"sw0\" is a switch");
  expect(R"({"list": [{"host": 2, "speed": 2}]})", "host index 2 is not in 0..1");
  expect(R"({"list": [{"host": 0, "speed": 0}]})", "events.list[0].speed");
  expect(R"({"list": [{"host": 0}]})", "events.list[0]: expected exactly one change");
  expect(R"({"list": [{"speed": 2}]})", "events.list[0]: expected exactly one target");
  expect(R"({"list": [{"node": "h0", "bandwidth": "1Gbps"}]})", "events.list[0].bandwidth");
  expect(R"({"list": [{"all_links": true, "speed": 2}]})", "events.list[0].speed");
  expect(R"({"list": [{"all_links": true, "up": true, "repair_after": "1s"}]})",
         "events.list[0].repair_after");
  expect(R"({"list": [{"at": "-1s", "all_links": true, "up": false}]})", "events.list[0].at");
  expect(R"({"list": [{"at": "1000y", "all_links": true, "up": false}]})", "events.list[0].at");
  expect(R"({"list": [{"all_links": true, "up": false, "when": "1s"}]})", "events.list[0]");
  expect(R"({"list": [{"host": "h0", "direction": "forward", "speed": 2}]})",
         "events.list[0].direction");
  expect(R"({"lists": []})",
         "events.lists: unknown key (known keys here: list, random_failures, trace)");
  expect(R"({"random_failures": {"mtbf": "1h", "repair": "1h"}})",
         "events.random_failures.until: needed");
  expect(R"({"trace": "missing.csv"})", "events.trace");
  // A trace's errors name its line.
  mlsim::testing::TempDir dir;
  dir.write("bad.csv", "at,change,target,value\n1s,speed,h0,fast\n");
  dir.write("header.csv", "time,change,target,value\n");
  dir.write("names.csv", "at,change,target,value\n1s,link_down,h0<>nowhere,\n");
  auto trace_error = [&](const std::string& file) {
    return test::prepare_error(scenario({{"model", "watcher"}}, {{"trace", file}}), reg,
                               dir.path() / "scenario.json");
  };
  EXPECT_NE(trace_error("bad.csv").find("bad.csv):2"), std::string::npos) << trace_error("bad.csv");
  EXPECT_NE(trace_error("header.csv").find("expected the header"), std::string::npos);
  EXPECT_NE(trace_error("names.csv").find("names.csv):2: no node named \"nowhere\""),
            std::string::npos)
      << trace_error("names.csv");
}

TEST(Events, ResolvedScenarioEchoesTheSectionWithDefaults) {
  const Registries reg = registries();
  const RunOutput r =
      test::run_json(scenario({{"model", "watcher"}},
                              json::parse(R"({"list": [{"link": ["h0", "sw0"], "up": false}]})")),
                     reg);
  EXPECT_EQ(r.resolved_scenario["events"]["list"][0]["at"], "0s");
  EXPECT_EQ(r.resolved_scenario["events"]["list"][0]["direction"], "both");
}
