#pragma once
// Registries for loader and runner tests, independent of the real models and backends: a
// "probe" model whose behaviour is computable by hand, and backends "flow" and "analytic" with
// an instant-delivery network (latency only), whose options parser is strict like a real one's.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>

#include "sim_core/run/registries.hpp"
#include "sim_core/scenario/json_reader.hpp"
#include "tests/support/temp_dir.hpp"

namespace mlsim::testing {

// Delivers every transfer after a fixed delay; no sharing, no statistics beyond totals.
class FixedDelayNetwork : public Network {
 public:
  FixedDelayNetwork(Engine& engine, Time delay) : engine_(engine), delay_(delay) {}
  std::string_view backend_name() const override { return "fixed"; }
  TransferId start_transfer(NodeId src, NodeId dst, Bytes bytes, DeliveryCallback done,
                            std::uint64_t = 0) override {
    const TransferId id = ++next_;
    ++totals_.transfers_started;
    totals_.bytes_started += bytes;
    const Time started = engine_.now();
    auto shared = std::make_shared<DeliveryCallback>(std::move(done));
    engine_.schedule_in(delay_, [this, id, src, dst, bytes, started, shared] {
      ++totals_.transfers_delivered;
      totals_.bytes_delivered += bytes;
      (*shared)(TransferResult{id, src, dst, bytes, started, engine_.now(), false});
    });
    return id;
  }
  bool cancel_transfer(TransferId) override { return false; }
  void set_link_bandwidth(LinkId, Bandwidth) override {}
  void set_link_latency(LinkId, Time) override {}
  void set_link_up(LinkId, bool) override {}
  LinkStats link_stats(LinkId) const override { return {}; }
  NetworkTotals totals() const override { return totals_; }

 private:
  Engine& engine_;
  Time delay_;
  TransferId next_ = 0;
  NetworkTotals totals_;
};

// "probe": sends `messages` transfers of `bytes` from host 0 to host 1, one after the other,
// and reports how long that took and a draw from its random stream.
class ProbeModel : public Model {
 public:
  ProbeModel(Bytes bytes, int messages) : bytes_(bytes), messages_(messages) {}
  void start(ModelEnv& env) override {
    env_ = &env;
    draw_ = env.stream("probe").uniform();
    send(env);
  }
  void finish(ModelEnv& env, Results& out) override {
    out.set_metric("messages_delivered", delivered_);
    out.set_metric("finish_time_s", finished_.seconds());
    out.set_metric("random_draw", draw_);
    TimeSeries ts{"deliveries", {"count"}, {}};
    for (int i = 0; i < delivered_; ++i) ts.add(times_[i], {static_cast<double>(i + 1)});
    out.add_series(std::move(ts));
    out.details()["network_backend"] = std::string(env.network.backend_name());
  }
  double progress(const ModelEnv&) const override {
    return static_cast<double>(delivered_) / messages_;
  }

 private:
  void send(ModelEnv& env) {
    env.network.start_transfer(env.topology.hosts()[0], env.topology.hosts()[1], bytes_,
                               [this](const TransferResult& r) {
                                 ++delivered_;
                                 finished_ = r.finished;
                                 times_.push_back(r.finished);
                                 if (delivered_ < messages_) send(*env_);
                               });
  }
  Bytes bytes_;
  int messages_;
  int delivered_ = 0;
  Time finished_;
  double draw_ = 0;
  std::vector<Time> times_;
  ModelEnv* env_ = nullptr;
};

inline Registries make_test_registries() {
  Registries r;
  for (const char* name : {"flow", "analytic"}) {
    r.backends.add(BackendInfo{name, std::string("test backend ") + name, [](JsonReader& options) {
                                 const Time delay = options.duration_or("delay", "1us");
                                 return [delay](Engine& e,
                                                const Topology&) -> std::unique_ptr<Network> {
                                   return std::make_unique<FixedDelayNetwork>(e, delay);
                                 };
                               }});
  }
  r.models.add(ModelInfo{
      "probe", "test model", {{"policy", "only", "the probe's behaviour"}}, [](ModelSetup& setup) {
        auto system = setup.root.object("system");
        system.ignore("model");
        const auto bytes = system.bytes_or("bytes", "1MiB");
        const auto messages = static_cast<int>(system.integer_or("messages", 3, 1, 1'000'000));
        system.finish();
        setup.root.object_or_empty("workload").finish();
        return std::make_unique<ProbeModel>(bytes, messages);
      }});
  return r;
}

}  // namespace mlsim::testing
