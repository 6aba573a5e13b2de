#include "models/serving/metrics.hpp"

#include <algorithm>
#include <limits>

namespace mlsim::serving {

ServingMetrics::ServingMetrics(SloTargets slo, std::int32_t tiers, Time series_interval,
                               bool request_log)
    : slo_(slo),
      series_interval_(series_interval),
      e2e_by_tier_(static_cast<std::size_t>(tiers)),
      by_class_(static_cast<std::size_t>(tiers)),
      request_log_(request_log) {}

void ServingMetrics::on_dropped(const Request& r) {
  ++dropped_;
  ++by_class_.at(static_cast<std::size_t>(r.spec.tier)).dropped;
  if (!request_log_) return;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  requests_.add(
      r.spec.arrival,
      {static_cast<double>(r.spec.id), static_cast<double>(r.spec.tier),
       static_cast<double>(r.replica), 1, r.spec.arrival.seconds(), nan, nan, nan, nan,
       static_cast<double>(r.spec.prompt_tokens), static_cast<double>(r.spec.output_tokens),
       static_cast<double>(r.prefix_hit), static_cast<double>(r.preemptions), 0});
}

void ServingMetrics::on_rejected_context(const Request& r) {
  ++rejected_context_;
  on_dropped(r);
}

void ServingMetrics::on_output_capped(const Request& r, std::int32_t allowed) {
  ++output_capped_;
  output_tokens_cut_ += static_cast<std::uint64_t>(r.spec.output_tokens - allowed);
}

void ServingMetrics::on_completed(const Request& r, Time now) {
  ++completed_;
  const double ttft = (r.first_token - r.spec.arrival).seconds();
  const double e2e = (now - r.spec.arrival).seconds();
  // Time per output token of the final answer (after its first token). Undefined for a one-token
  // answer (no token follows the first): such requests are left out of the TPOT statistics and
  // judged on the TTFT SLO alone, and counted (serving_requests_tpot_undefined).
  const Time answer_first = r.escalated ? r.answer_start : r.first_token;
  const bool has_tpot = r.spec.output_tokens > 1;
  const double tpot = has_tpot ? (now - answer_first).seconds() / (r.spec.output_tokens - 1) : 0.0;
  ttft_.add(ttft);
  ttft_sum_s_ += ttft;
  e2e_sum_s_ += e2e;
  if (has_tpot) tpot_.add(tpot);
  e2e_.add(e2e);
  e2e_per_token_.add(e2e / r.spec.output_tokens);
  e2e_by_tier_.at(static_cast<std::size_t>(r.spec.tier)).add(e2e);
  tokens_requested_ += static_cast<std::uint64_t>(r.spec.output_tokens);
  tokens_generated_ += static_cast<std::uint64_t>(r.generated);
  preemptions_ += static_cast<std::uint64_t>(r.preemptions);
  if (r.escalated) ++escalated_;
  const bool ttft_ok = ttft <= slo_.ttft.seconds();
  const bool tpot_ok = has_tpot && tpot <= slo_.tpot.seconds();
  if (ttft_ok) ++ttft_met_;
  if (tpot_ok) ++tpot_met_;
  if (!has_tpot) ++tpot_undefined_;
  // A one-token answer (no TPOT) is judged on the TTFT SLO alone.
  const bool met = ttft_ok && (tpot_ok || !has_tpot);
  if (met) ++slo_met_;
  ClassCounts& c = by_class_.at(static_cast<std::size_t>(r.spec.tier));
  ++c.completed;
  c.ttft_met += ttft_ok ? 1 : 0;
  c.tpot_met += tpot_ok ? 1 : 0;
  c.tpot_defined += has_tpot ? 1 : 0;
  c.slo_met += met ? 1 : 0;
  if (request_log_)
    requests_.add(
        now,
        {static_cast<double>(r.spec.id), static_cast<double>(r.spec.tier),
         static_cast<double>(r.replica), 0, r.spec.arrival.seconds(),
         (r.admitted - r.spec.arrival).seconds(), ttft,
         has_tpot ? tpot : std::numeric_limits<double>::quiet_NaN(), e2e,
         static_cast<double>(r.spec.prompt_tokens), static_cast<double>(r.spec.output_tokens),
         static_cast<double>(r.prefix_hit), static_cast<double>(r.preemptions), met ? 1.0 : 0.0});
}

void ServingMetrics::maybe_sample(Time now, std::int64_t in_system, std::int64_t waiting) {
  if (now < next_sample_) return;
  next_sample_ = now + series_interval_;
  series_.add(now,
              {static_cast<double>(in_system), static_cast<double>(waiting), kv_bytes_.current(),
               static_cast<double>(completed_), static_cast<double>(tokens_generated_)});
}

void ServingMetrics::write(Results& out, Time makespan) const {
  out.set_metric("serving_requests_arrived", static_cast<double>(arrived_));
  out.set_metric("serving_requests_completed", static_cast<double>(completed_));
  out.set_metric("serving_requests_dropped", static_cast<double>(dropped_));
  out.set_metric("serving_requests_rejected_context", static_cast<double>(rejected_context_));
  out.set_metric("serving_requests_output_capped", static_cast<double>(output_capped_));
  out.set_metric("serving_tokens_cut_by_context", static_cast<double>(output_tokens_cut_));
  out.set_metric("serving_requests_escalated", static_cast<double>(escalated_));
  out.set_metric("serving_preemptions", static_cast<double>(preemptions_));
  out.set_metric("serving_tokens_requested", static_cast<double>(tokens_requested_));
  out.set_metric("serving_tokens_generated", static_cast<double>(tokens_generated_));
  out.set_metric("serving_makespan_s", makespan.seconds());
  out.set_metric(
      "serving_throughput_tokens_per_s",
      makespan.count_ns() > 0 ? static_cast<double>(tokens_generated_) / makespan.seconds() : 0);
  out.set_metric(
      "serving_throughput_requests_per_s",
      makespan.count_ns() > 0 ? static_cast<double>(completed_) / makespan.seconds() : 0);
  out.set_metric("serving_slo_attainment",
                 arrived_ ? static_cast<double>(slo_met_) / static_cast<double>(arrived_) : 0);
  // Goodput (DistServe's term): requests per second that met both SLOs, over the makespan.
  out.set_metric("serving_goodput_requests_per_s",
                 makespan.count_ns() > 0 ? static_cast<double>(slo_met_) / makespan.seconds() : 0);
  out.set_summary("serving_ttft", ttft_.summary(), "_s");
  // Like serving_slo_attainment, over every arrival (a dropped request meets no SLO).
  out.set_metric("serving_slo_ttft_attainment",
                 arrived_ ? static_cast<double>(ttft_met_) / static_cast<double>(arrived_) : 0);
  // Over the requests whose TPOT is defined (two output tokens or more).
  out.set_metric(
      "serving_slo_tpot_attainment",
      tpot_.count() ? static_cast<double>(tpot_met_) / static_cast<double>(tpot_.count()) : 0);
  out.set_metric("serving_requests_tpot_undefined", static_cast<double>(tpot_undefined_));
  out.set_summary("serving_tpot", tpot_.summary(), "_s");
  out.set_summary("serving_e2e", e2e_.summary(), "_s");
  out.set_summary("serving_e2e_per_token", e2e_per_token_.summary(), "_s");
  for (std::size_t t = 0; t < e2e_by_tier_.size(); ++t)
    if (e2e_by_tier_[t].count() > 0)
      out.set_metric("serving_e2e_mean_tier" + std::to_string(t) + "_s", e2e_by_tier_[t].mean());
  // Per request class (its target tier, see ClassCounts), with the overall metrics' definitions:
  // attainment over the class's arrivals (TPOT over its requests with a TPOT), goodput over the
  // whole run's makespan (so the classes' goodputs sum to the overall one).
  const auto ratio = [](std::uint64_t num, std::uint64_t den) {
    return den ? static_cast<double>(num) / static_cast<double>(den) : 0.0;
  };
  for (std::size_t t = 0; t < by_class_.size(); ++t) {
    const ClassCounts& c = by_class_[t];
    const std::string prefix = "serving_tier" + std::to_string(t) + "_";
    out.set_metric(prefix + "requests_arrived", static_cast<double>(c.arrived));
    out.set_metric(prefix + "requests_completed", static_cast<double>(c.completed));
    out.set_metric(prefix + "requests_dropped", static_cast<double>(c.dropped));
    out.set_metric(prefix + "requests_slo_met", static_cast<double>(c.slo_met));
    out.set_metric(prefix + "slo_attainment", ratio(c.slo_met, c.arrived));
    out.set_metric(prefix + "slo_ttft_attainment", ratio(c.ttft_met, c.arrived));
    out.set_metric(prefix + "slo_tpot_attainment", ratio(c.tpot_met, c.tpot_defined));
    out.set_metric(
        prefix + "goodput_requests_per_s",
        makespan.count_ns() > 0 ? static_cast<double>(c.slo_met) / makespan.seconds() : 0);
  }
  out.set_metric("serving_memory_weights_bytes", weight_bytes_);
  out.set_metric("serving_memory_kv_peak_bytes", kv_bytes_.peak());
  out.set_metric("serving_memory_kv_mean_bytes", kv_bytes_.average(makespan));
  out.set_metric("serving_memory_peak_bytes", weight_bytes_ + kv_bytes_.peak());
  out.set_metric("serving_memory_mean_bytes", weight_bytes_ + kv_bytes_.average(makespan));
  out.add_series(series_);
  if (request_log_) out.add_series(requests_);
  // Latency CDFs (e2e, TTFT, TPOT): up to 200 evenly spaced points (latency_s, cumulative
  // fraction) each.
  const auto cdf_of = [](const ExactQuantiles& q) {
    auto cdf = nlohmann::json::array();
    const auto& v = q.sorted();
    const std::size_t points = std::min<std::size_t>(200, v.size());
    for (std::size_t i = 1; i <= points; ++i) {
      const std::size_t idx = (v.size() * i + points - 1) / points - 1;
      cdf.push_back({v[idx], static_cast<double>(idx + 1) / static_cast<double>(v.size())});
    }
    return cdf;
  };
  out.details()["serving_e2e_cdf"] = cdf_of(e2e_);
  out.details()["serving_ttft_cdf"] = cdf_of(ttft_);
  out.details()["serving_tpot_cdf"] = cdf_of(tpot_);
  if (kv_transfer_.count() > 0) {
    // Prefill/decode disaggregation: the KV transfers' durations and their wait for decode KV.
    out.set_summary("serving_kv_transfer", kv_transfer_.summary(), "_s");
    out.set_summary("serving_kv_decode_wait", kv_decode_wait_.summary(), "_s");
    out.set_metric("serving_kv_transfer_bytes", kv_transfer_bytes_);
    out.details()["serving_kv_transfer_cdf"] = cdf_of(kv_transfer_);
  }
}

}  // namespace mlsim::serving
