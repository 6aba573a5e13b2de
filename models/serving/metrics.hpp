#pragma once
// Request-level and system-level serving metrics: TTFT, time per output token, end-to-end
// latency (and per output token), SLO attainment, throughput, GPU memory (weights; KV cache and
// stored features, peak and time-averaged), per-replica utilisation, time series and latency CDF
// points, and optionally a per-request log (time = completion, or arrival for a drop). Exact
// quantiles: per-request values are kept (8 bytes each, 19k requests = 150 kB).
#include <cstdint>
#include <string>
#include <vector>

#include "models/serving/request.hpp"
#include "sim_core/base/stats.hpp"
#include "sim_core/run/results.hpp"

namespace mlsim::serving {

struct SloTargets {
  Time ttft = Time::s(2);
  Time tpot = Time::ms(200);
};

class ServingMetrics {
 public:
  // `request_log`: one row per request (completed or dropped) in the series "serving_requests".
  ServingMetrics(SloTargets slo, std::int32_t tiers, Time series_interval,
                 bool request_log = false);

  void on_arrival(const Request& r) {
    ++arrived_;
    ++by_class_.at(static_cast<std::size_t>(r.spec.tier)).arrived;
  }
  void on_dropped(const Request& r);
  // The prompt reaches the model's context limit: refused, reported dropped and counted apart.
  void on_rejected_context(const Request& r);
  // The output is cut to `allowed` tokens by the context limit (before it is served).
  void on_output_capped(const Request& r, std::int32_t allowed);
  // The request's final answer is complete at `now`.
  void on_completed(const Request& r, Time now);
  // Total KV (and feature) bytes in use across replicas changed.
  void set_kv_bytes(Time now, double bytes) { kv_bytes_.set(now, bytes); }
  void add_weight_bytes(double bytes) { weight_bytes_ += bytes; }
  // Prefill/decode disaggregation: a request's KV waited `wait` for room in a decode replica,
  // then took `transfer` to move `bytes`.
  void on_kv_transfer(Time wait, Time transfer, std::int64_t bytes) {
    kv_decode_wait_.add(wait.seconds());
    kv_transfer_.add(transfer.seconds());
    kv_transfer_bytes_ += static_cast<double>(bytes);
  }
  const ExactQuantiles& kv_transfer() const { return kv_transfer_; }
  // Whether maybe_sample at `now` would record a sample.
  bool sample_due(Time now) const { return now >= next_sample_; }
  // Samples the time series if `series_interval` has passed since the last sample.
  void maybe_sample(Time now, std::int64_t in_system, std::int64_t waiting);

  std::uint64_t arrived() const { return arrived_; }
  std::uint64_t completed() const { return completed_; }
  std::uint64_t dropped() const { return dropped_; }
  std::uint64_t rejected_context() const { return rejected_context_; }
  std::uint64_t output_capped() const { return output_capped_; }
  std::uint64_t tokens_requested() const { return tokens_requested_; }
  std::uint64_t tokens_generated() const { return tokens_generated_; }
  const ExactQuantiles& e2e() const { return e2e_; }
  const ExactQuantiles& ttft() const { return ttft_; }
  // Over requests with two output tokens or more (TPOT is undefined for one).
  const ExactQuantiles& tpot() const { return tpot_; }
  std::uint64_t slo_met() const { return slo_met_; }
  // Sums over the completed requests (latency over time is their change between two samples).
  double ttft_sum_s() const { return ttft_sum_s_; }
  double e2e_sum_s() const { return e2e_sum_s_; }
  std::uint64_t tpot_undefined() const { return tpot_undefined_; }
  double weight_bytes() const { return weight_bytes_; }
  const TimeAverage& kv_bytes() const { return kv_bytes_; }

  // Per request class. A request's class is its target tier (RequestSpec::tier: the model of the
  // family the workload's tier mix assigned it; 0 alone for a single-model deployment). Neither
  // the traces (Azure, Mooncake) nor the generator carry a class of their own, and one run serves
  // one source, so the tier is the class a scenario names. An escalated request stays in its
  // target tier's class.
  struct ClassCounts {
    std::uint64_t arrived = 0, completed = 0, dropped = 0;
    std::uint64_t ttft_met = 0, tpot_met = 0, tpot_defined = 0, slo_met = 0;
  };
  const std::vector<ClassCounts>& by_class() const { return by_class_; }

  // Writes metrics ("serving_*"), the series and the CDF points. `makespan` is the time of the
  // last completion.
  void write(Results& out, Time makespan) const;

 private:
  SloTargets slo_;
  Time series_interval_;
  Time next_sample_ = Time::zero();
  std::uint64_t arrived_ = 0, completed_ = 0, dropped_ = 0, slo_met_ = 0, escalated_ = 0;
  std::uint64_t ttft_met_ = 0, tpot_met_ = 0, tpot_undefined_ = 0;
  std::uint64_t rejected_context_ = 0, output_capped_ = 0, output_tokens_cut_ = 0;
  std::uint64_t tokens_requested_ = 0, tokens_generated_ = 0, preemptions_ = 0;
  ExactQuantiles ttft_, tpot_, e2e_, e2e_per_token_;
  ExactQuantiles kv_transfer_, kv_decode_wait_;
  double kv_transfer_bytes_ = 0;
  double ttft_sum_s_ = 0, e2e_sum_s_ = 0;
  std::vector<ExactQuantiles> e2e_by_tier_;
  std::vector<ClassCounts> by_class_;
  double weight_bytes_ = 0;
  TimeAverage kv_bytes_;
  bool request_log_;
  TimeSeries requests_{
      "serving_requests",
      {"id", "tier", "replica", "dropped", "arrival_s", "queue_s", "ttft_s", "tpot_s", "e2e_s",
       "prompt_tokens", "output_tokens", "prefix_hit_tokens", "preemptions", "slo_met"},
      {}};
  TimeSeries series_{"serving_timeline",
                     {"requests_in_system", "waiting", "kv_bytes", "completed", "tokens_generated"},
                     {}};
};

}  // namespace mlsim::serving
