#include "models/serving/request_source.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>

#include "sim_core/base/error.hpp"
#include "sim_core/base/input_file.hpp"
#include "sim_core/base/text_fields.hpp"

namespace mlsim::serving {

namespace {

std::int64_t to_int(std::string_view s, const std::string& where) {
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size())
    throw InputError(where, fmt::format("expected an integer, got \"{}\"", s));
  return v;
}

}  // namespace

std::int64_t parse_trace_timestamp_ns(std::string_view t, const std::string& where) {
  if (const auto ns = parse_timestamp_ns(t)) return *ns;
  throw InputError(where, fmt::format("expected a timestamp \"YYYY-MM-DD HH:MM:SS.fffffff\", "
                                      "got \"{}\"",
                                      t));
}

LineTraceSource::LineTraceSource(const std::filesystem::path& file, double rate_scale,
                                 std::int64_t limit, std::string json_path)
    : file_(file),
      json_path_(std::move(json_path)),
      in_(open_input_file(file, json_path_, "request trace")),
      rate_scale_(rate_scale),
      limit_(limit) {
  if (!(rate_scale > 0)) throw InputError(json_path_, "rate_scale must be > 0");
}

std::optional<std::string> LineTraceSource::read_header() {
  std::string header;
  if (!std::getline(in_, header)) return std::nullopt;
  ++line_no_;
  if (!header.empty() && header.back() == '\r') header.pop_back();
  return header;
}

std::optional<RequestSpec> LineTraceSource::next() {
  if (limit_ >= 0 && static_cast<std::int64_t>(next_id_) >= limit_) return std::nullopt;
  std::string line;
  while (std::getline(in_, line)) {
    ++line_no_;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    RequestSpec r;
    try {
      r = parse_line(line, fmt::format("{}:{}", file_.string(), line_no_));
    } catch (const InputError& e) {  // "FILE:LINE: what" at the key that named the trace
      throw InputError(json_path_, e.path() + ": " + e.message());
    }
    r.id = next_id_++;
    if (rate_scale_ != 1.0)
      r.arrival = Time::ns(static_cast<std::int64_t>(
          std::llround(static_cast<double>(r.arrival.count_ns()) / rate_scale_)));
    return r;
  }
  return std::nullopt;
}

AzureTraceSource::AzureTraceSource(const std::filesystem::path& file, double rate_scale,
                                   std::int64_t limit, std::string json_path)
    : LineTraceSource(file, rate_scale, limit, std::move(json_path)) {
  if (read_header().value_or("") != "TIMESTAMP,ContextTokens,GeneratedTokens")
    throw InputError(this->json_path(), file.string() +
                                            ":1: expected the header "
                                            "\"TIMESTAMP,ContextTokens,GeneratedTokens\"");
}

RequestSpec AzureTraceSource::parse_line(std::string_view line, const std::string& where) {
  const auto c1 = line.find(',');
  const auto c2 = c1 == std::string::npos ? c1 : line.find(',', c1 + 1);
  if (c2 == std::string::npos) throw InputError(where, "expected three comma-separated fields");
  const auto ns = parse_trace_timestamp_ns(line.substr(0, c1), where);
  const auto context = to_int(line.substr(c1 + 1, c2 - c1 - 1), where);
  const auto generated = to_int(line.substr(c2 + 1), where);
  if (context < 0 || generated < 0) throw InputError(where, "token counts must be >= 0");
  if (!first_ns_) first_ns_ = ns;
  if (ns < *first_ns_) throw InputError(where, "timestamps must not go backwards");
  RequestSpec r;
  r.arrival = Time::ns(ns - *first_ns_);
  r.prompt_tokens = static_cast<std::int32_t>(std::max<std::int64_t>(1, context));
  r.output_tokens = static_cast<std::int32_t>(std::max<std::int64_t>(1, generated));
  return r;
}

MooncakeTraceSource::MooncakeTraceSource(const std::filesystem::path& file, double rate_scale,
                                         std::int64_t limit, std::string json_path)
    : LineTraceSource(file, rate_scale, limit, std::move(json_path)) {}

RequestSpec MooncakeTraceSource::parse_line(std::string_view line, const std::string& where) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(where, std::string("invalid JSON: ") + e.what());
  }
  if (!j.is_object()) throw InputError(where, "expected a JSON object");
  auto integer = [&](const char* key) {
    auto it = j.find(key);
    if (it == j.end()) throw InputError(where, fmt::format("missing \"{}\"", key));
    if (!it->is_number_integer() || it->get<std::int64_t>() < 0)
      throw InputError(where, fmt::format("\"{}\": expected an integer >= 0", key));
    return it->get<std::int64_t>();
  };
  for (auto it = j.begin(); it != j.end(); ++it)
    if (it.key() != "timestamp" && it.key() != "input_length" && it.key() != "output_length" &&
        it.key() != "hash_ids")
      throw InputError(where, fmt::format("unknown key \"{}\" (known: timestamp, input_length, "
                                          "output_length, hash_ids)",
                                          it.key()));
  const auto ms = integer("timestamp");
  const auto input = integer("input_length");
  const auto output = integer("output_length");
  if (input > (1 << 30) || output > (1 << 30)) throw InputError(where, "token counts above 2^30");
  if (ms < last_ms_) throw InputError(where, "timestamps must not go backwards");
  if (ms > std::int64_t{10} * 365 * 24 * 3600 * 1000)
    throw InputError(where, "timestamp beyond 10 years");
  last_ms_ = ms;
  auto hashes = j.find("hash_ids");
  if (hashes == j.end()) throw InputError(where, "missing \"hash_ids\"");
  if (!hashes->is_array()) throw InputError(where, "\"hash_ids\": expected an array");
  const auto blocks = (input + kBlockTokens - 1) / kBlockTokens;
  if (static_cast<std::int64_t>(hashes->size()) != blocks)
    throw InputError(where, fmt::format("\"hash_ids\": expected {} ids (one per {}-token block of "
                                        "{} input tokens), got {}",
                                        blocks, kBlockTokens, input, hashes->size()));
  RequestSpec r;
  r.arrival = Time::ms(ms);
  r.prompt_tokens = static_cast<std::int32_t>(std::max<std::int64_t>(1, input));
  r.output_tokens = static_cast<std::int32_t>(std::max<std::int64_t>(1, output));
  r.block_hashes.reserve(hashes->size());
  for (const auto& h : *hashes) {
    if (!h.is_number_integer() || h.get<std::int64_t>() < 0)
      throw InputError(where, "\"hash_ids\": expected integers >= 0");
    r.block_hashes.push_back(h.get<std::uint64_t>());
  }
  return r;
}

BurstGptTraceSource::BurstGptTraceSource(const std::filesystem::path& file, double rate_scale,
                                         std::int64_t limit, std::string json_path)
    : LineTraceSource(file, rate_scale, limit, std::move(json_path)) {
  constexpr std::string_view kHeader =
      "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type";
  if (read_header().value_or("") != kHeader)
    throw InputError(this->json_path(), fmt::format("{}:1: expected the BurstGPT header \"{}\"",
                                                    file.string(), kHeader));
}

RequestSpec BurstGptTraceSource::parse_line(std::string_view line, const std::string& where) {
  std::string_view fields[6];
  std::size_t n = 0, start = 0;
  while (true) {
    const auto comma = line.find(',', start);
    if (n == 6) throw InputError(where, "expected six comma-separated fields, got more");
    fields[n++] = line.substr(start, comma == std::string_view::npos ? comma : comma - start);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  if (n != 6)
    throw InputError(where, fmt::format("expected six comma-separated fields, got {}", n));
  double seconds = 0;
  const auto ts = fields[0];
  auto [p, ec] = std::from_chars(ts.data(), ts.data() + ts.size(), seconds);
  if (ec != std::errc() || p != ts.data() + ts.size() || !(seconds >= 0) ||
      seconds > 10.0 * 365 * 24 * 3600)
    throw InputError(where,
                     fmt::format("Timestamp: expected seconds in [0, 10 years], got \"{}\"", ts));
  const auto prompt = to_int(fields[2], where);
  const auto output = to_int(fields[3], where);
  if (prompt < 0 || output < 0) throw InputError(where, "token counts must be >= 0");
  if (prompt > (1 << 30) || output > (1 << 30)) throw InputError(where, "token counts above 2^30");
  const auto ns = static_cast<std::int64_t>(std::llround(seconds * 1e9));
  if (!first_ns_) first_ns_ = last_ns_ = ns;
  if (ns < last_ns_) throw InputError(where, "timestamps must not go backwards");
  last_ns_ = ns;
  RequestSpec r;
  r.arrival = Time::ns(ns - *first_ns_);
  r.prompt_tokens = static_cast<std::int32_t>(std::max<std::int64_t>(1, prompt));
  r.output_tokens = static_cast<std::int32_t>(std::max<std::int64_t>(1, output));
  return r;
}

std::int32_t LogNormal::draw(RandomStream& rng) const {
  const double v = std::round(rng.lognormal(mu, sigma));
  return static_cast<std::int32_t>(
      std::clamp(v, static_cast<double>(min), static_cast<double>(max)));
}

LengthFit fit_lengths(const std::filesystem::path& azure_csv) {
  AzureTraceSource src(azure_csv);
  double sp = 0, sp2 = 0, so = 0, so2 = 0;
  LengthFit fit;
  fit.prompt.min = fit.output.min = 1 << 30;
  fit.prompt.max = fit.output.max = 0;
  while (auto r = src.next()) {
    const double lp = std::log(r->prompt_tokens), lo = std::log(r->output_tokens);
    sp += lp;
    sp2 += lp * lp;
    so += lo;
    so2 += lo * lo;
    fit.prompt.min = std::min(fit.prompt.min, r->prompt_tokens);
    fit.prompt.max = std::max(fit.prompt.max, r->prompt_tokens);
    fit.output.min = std::min(fit.output.min, r->output_tokens);
    fit.output.max = std::max(fit.output.max, r->output_tokens);
    ++fit.samples;
  }
  if (fit.samples < 2) throw InputError(azure_csv.string(), "too few requests to fit lengths");
  const double n = static_cast<double>(fit.samples);
  fit.prompt.mu = sp / n;
  fit.prompt.sigma = std::sqrt(std::max(0.0, sp2 / n - fit.prompt.mu * fit.prompt.mu));
  fit.output.mu = so / n;
  fit.output.sigma = std::sqrt(std::max(0.0, so2 / n - fit.output.mu * fit.output.mu));
  return fit;
}

GeneratedSource::GeneratedSource(GeneratorParams params, RandomStream arrivals,
                                 RandomStream lengths)
    : params_(std::move(params)), arrivals_(arrivals), lengths_(lengths) {
  MLSIM_CHECK(params_.rate_per_s > 0 && params_.arrival_cv > 0, "bad generator parameters");
  MLSIM_CHECK((params_.fixed_prompt > 0) == (params_.fixed_output > 0),
              "fixed lengths: both or none");
}

std::optional<RequestSpec> GeneratedSource::next() {
  if (produced_ >= params_.count) return std::nullopt;
  RequestSpec r;
  r.id = static_cast<std::uint64_t>(produced_);
  if (produced_ > 0) {
    // Gamma with shape 1/cv^2 and mean 1/rate; shape 1 is the exponential (Poisson arrivals).
    const double shape = 1.0 / (params_.arrival_cv * params_.arrival_cv);
    clock_s_ += params_.arrival_cv == 1.0
                    ? arrivals_.exponential(params_.rate_per_s)
                    : arrivals_.gamma(shape, 1.0 / (params_.rate_per_s * shape));
  }
  r.arrival = Time::from_seconds(clock_s_);
  const bool fixed = params_.fixed_prompt > 0;
  r.prompt_tokens = fixed ? params_.fixed_prompt : params_.lengths.prompt.draw(lengths_);
  r.output_tokens = fixed ? params_.fixed_output : params_.lengths.output.draw(lengths_);
  ++produced_;
  return r;
}

}  // namespace mlsim::serving
