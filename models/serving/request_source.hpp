#pragma once
// Where requests come from, one at a time (the serving system keeps a single pending arrival on
// the engine, so a whole trace is never loaded into events or memory).
//  - AzureTraceSource streams the Azure LLM inference traces 2023 (Patel et al., Splitwise,
//    ISCA'24; CSV TIMESTAMP, ContextTokens, GeneratedTokens) and turns the wall-clock timestamps
//    (100 ns resolution) into offsets from the first request.
//  - MooncakeTraceSource streams Mooncake's JSON-lines traces (Qin et al., FAST'25), with the
//    prompts' block content ids (hash_ids) for prefix caching.
//  - BurstGptTraceSource streams the BurstGPT CSV (Wang et al., arXiv 2401.17644; HPMLL/BurstGPT,
//    data/BurstGPT_*.csv): seconds from the collection's start and token counts per request.
//  - GeneratedSource draws Poisson or gamma inter-arrival times and log-normal prompt and output
//    lengths (fitted to a trace with fit_lengths, or given), or fixed lengths.
// Tiers are assigned afterwards by the serving system, so every source serves every study.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "models/serving/request.hpp"
#include "sim_core/engine/random.hpp"

namespace mlsim::serving {

class RequestSource {
 public:
  virtual ~RequestSource() = default;
  // The next request in arrival order (non-decreasing arrival), or nothing when exhausted.
  virtual std::optional<RequestSpec> next() = 0;
  // Number of requests this source will yield, when known (for progress); -1 otherwise.
  virtual std::int64_t expected_count() const { return -1; }
  // Tokens per block of RequestSpec::block_hashes (content ids for prefix caching); 0 when the
  // source gives none.
  virtual std::int32_t hash_block_tokens() const { return 0; }
};

// "2023-11-16 18:15:46.6805900" -> nanoseconds since 1970-01-01 (UTC, proleptic Gregorian).
// Throws InputError at `where` on malformed text.
std::int64_t parse_trace_timestamp_ns(std::string_view text, const std::string& where);

// A trace read line by line from a file: one line in memory at a time. Blank lines are skipped;
// a derived reader turns one line into a request (arrival as an offset from the trace's start).
// The base numbers requests, applies `rate_scale` (> 0 multiplies the arrival rate: offsets are
// divided by it) and `limit` (-1: all), and reports errors as "FILE:LINE: what" at `json_path`,
// the key that named the file.
class LineTraceSource : public RequestSource {
 public:
  std::optional<RequestSpec> next() final;
  std::int64_t lines_read() const { return line_no_; }

 protected:
  LineTraceSource(const std::filesystem::path& file, double rate_scale, std::int64_t limit,
                  std::string json_path);
  // One non-blank line (without its line end); `where` is "FILE:LINE" for errors. Returns the
  // request with `arrival` holding the offset from the trace's start, unscaled; id is set later.
  virtual RequestSpec parse_line(std::string_view line, const std::string& where) = 0;
  // Reads the first line (a header), counting it; nothing when the file is empty.
  std::optional<std::string> read_header();
  const std::filesystem::path& file() const { return file_; }
  const std::string& json_path() const { return json_path_; }

 private:
  std::filesystem::path file_;
  std::string json_path_;
  std::ifstream in_;
  double rate_scale_;
  std::int64_t limit_;
  std::int64_t line_no_ = 0;
  std::uint64_t next_id_ = 0;
};

// The Azure LLM inference trace CSV; zero-length outputs are read as 1 token (a request samples
// at least one token), zero-length prompts as 1 token.
class AzureTraceSource final : public LineTraceSource {
 public:
  AzureTraceSource(const std::filesystem::path& file, double rate_scale = 1.0,
                   std::int64_t limit = -1, std::string json_path = "workload.trace");

 private:
  RequestSpec parse_line(std::string_view line, const std::string& where) override;
  std::optional<std::int64_t> first_ns_;
};

// Mooncake's trace format (kvcache-ai/Mooncake, FAST25-release/traces, e.g. synthetic_trace.jsonl):
// one JSON object per line with "timestamp" (milliseconds from the trace's start), "input_length",
// "output_length" and "hash_ids" (one content id per 512-token block of the prompt, the last block
// possibly partial; equal ids mean equal prefix blocks). Zero lengths are read as 1 token, as in
// the Azure reader. Other keys are errors.
class MooncakeTraceSource final : public LineTraceSource {
 public:
  static constexpr std::int32_t kBlockTokens = 512;  // Mooncake's block of hash_ids
  MooncakeTraceSource(const std::filesystem::path& file, double rate_scale = 1.0,
                      std::int64_t limit = -1, std::string json_path = "workload.trace");
  std::int32_t hash_block_tokens() const override { return kBlockTokens; }

 private:
  RequestSpec parse_line(std::string_view line, const std::string& where) override;
  std::int64_t last_ms_ = 0;
};

// The BurstGPT trace CSV (HPMLL/BurstGPT README, data/BurstGPT_1.csv and the "without_fails"
// files), header "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type":
// Timestamp in seconds (decimals allowed) from the collection's start, turned into offsets from
// the first row as the Azure reader does; Request/Response tokens the prompt and output lengths.
// Model (ChatGPT, GPT-4), Total tokens and Log Type (Conversation log, API log) are read but not
// used: tiers are assigned by the serving system. A failed request (the README: Response tokens
// 0) is read as a one-token answer, as the Azure reader reads a zero output; the
// BurstGPT_without_fails_*.csv files leave them out. No file of this trace is in ../shared/data:
// the reader is tested on small hand-written files (request_source_test.cpp).
class BurstGptTraceSource final : public LineTraceSource {
 public:
  BurstGptTraceSource(const std::filesystem::path& file, double rate_scale = 1.0,
                      std::int64_t limit = -1, std::string json_path = "workload.trace");

 private:
  RequestSpec parse_line(std::string_view line, const std::string& where) override;
  std::optional<std::int64_t> first_ns_;
  std::int64_t last_ns_ = 0;
};

struct LogNormal {
  double mu = 0, sigma = 0;             // of the natural log
  std::int32_t min = 1, max = 1 << 20;  // clamped to [min, max] after rounding
  std::int32_t draw(RandomStream& rng) const;
};

struct LengthFit {
  LogNormal prompt, output;
  std::int64_t samples = 0;
};
// Maximum-likelihood log-normal fit (mean and standard deviation of the log lengths) of a trace's
// prompt and output lengths; the clamps are the trace's observed minimum and maximum.
LengthFit fit_lengths(const std::filesystem::path& azure_csv);

struct GeneratorParams {
  double rate_per_s = 1;
  // Coefficient of variation of inter-arrival times: 1 is Poisson; gamma arrivals otherwise.
  double arrival_cv = 1;
  std::int64_t count = 0;  // requests to generate
  LengthFit lengths;
  // Fixed lengths for controlled studies: when > 0, every request has this many prompt (output)
  // tokens and `lengths` is not used (no length draw is made).
  std::int32_t fixed_prompt = 0, fixed_output = 0;
};

class GeneratedSource final : public RequestSource {
 public:
  GeneratedSource(GeneratorParams params, RandomStream arrivals, RandomStream lengths);
  std::optional<RequestSpec> next() override;
  std::int64_t expected_count() const override { return params_.count; }

 private:
  GeneratorParams params_;
  RandomStream arrivals_, lengths_;
  std::int64_t produced_ = 0;
  double clock_s_ = 0;
};

}  // namespace mlsim::serving
