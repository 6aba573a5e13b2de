#pragma once
// Strict, path-aware reading of one JSON object of a scenario.
//
// Every accessor names the JSON path in its error ("system.bytes: expected a size ..."), finish()
// rejects keys nobody read, and a default taken for an absent key is written back into the
// object, so the scenario echoed with the results shows every value the run used.
//
// Models parse their section through a JsonReader into a typed Params struct; mechanisms never
// see JSON.
#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "sim_core/base/units.hpp"

namespace mlsim {

// Bounds on the quantities a scenario may give, enforced by the accessors below with the JSON
// path. They keep sums and products of accepted values inside the clock's 292-year range
// (time.hpp checks the rest) while staying orders of magnitude beyond any real system:
// - a duration at most 10 years [assumed: the longest traces replayed, Philly and Helios, span
//   months; 10 years leaves 29 such durations before the clock overflows];
inline constexpr Time kMaxInputDuration = Time::s(std::int64_t{10} * 365 * 24 * 3600);
// - a size at most 1 PiB [assumed: 1000x the largest GPU memory or gradient of today];
inline constexpr Bytes kMaxInputBytes{std::int64_t{1} << 50};
// - a bandwidth at least 1 Kbps [assumed: 10^7x below a 10 Gbps link; 1 GiB at 1 Kbps still takes
//   only 99 days];
inline constexpr double kMinInputBandwidthBitsPerS = 1e3;
// - a compute rate at least 1 MFLOPS [assumed: 10^6x below a 2010 GPU].
inline constexpr double kMinInputFlopsPerS = 1e6;

class JsonReader {
 public:
  // `j` must be an object (else InputError at `path`). `path` is "" for the document root.
  JsonReader(nlohmann::json& j, std::string path);

  const std::string& path() const { return path_; }
  std::string path_of(std::string_view key) const;
  bool has(std::string_view key) const;
  // Whether an accessor (or ignore()) has taken the key so far.
  bool was_read(std::string_view key) const { return read_.contains(key); }

  JsonReader object(std::string_view key);
  std::optional<JsonReader> optional_object(std::string_view key);
  // An object created empty when absent (a section whose fields all have defaults).
  JsonReader object_or_empty(std::string_view key);
  std::vector<JsonReader> objects(std::string_view key);  // an array of objects

  std::string string(std::string_view key);
  std::string string_or(std::string_view key, const std::string& def);
  // One of `allowed`; the error lists them.
  std::string choice(std::string_view key, std::initializer_list<std::string_view> allowed);
  std::string choice_or(std::string_view key, std::initializer_list<std::string_view> allowed,
                        const std::string& def);
  std::string choice(std::string_view key, const std::vector<std::string>& allowed);

  std::int64_t integer(std::string_view key, std::int64_t min, std::int64_t max);
  std::int64_t integer_or(std::string_view key, std::int64_t def, std::int64_t min,
                          std::int64_t max);
  double number(std::string_view key, double min, double max);
  double number_or(std::string_view key, double def, double min, double max);
  bool boolean(std::string_view key);
  bool boolean_or(std::string_view key, bool def);

  // Quantities within the bounds above.
  Bytes bytes(std::string_view key);  // <= kMaxInputBytes
  Bytes bytes_or(std::string_view key, const std::string& def);
  Bandwidth bandwidth(std::string_view key);  // >= kMinInputBandwidthBitsPerS
  Bandwidth bandwidth_or(std::string_view key, const std::string& def);
  Time duration(std::string_view key);  // in [0, kMaxInputDuration]
  Time duration_or(std::string_view key, const std::string& def);
  FlopRate flop_rate(std::string_view key);  // >= kMinInputFlopsPerS

  std::vector<double> numbers(std::string_view key, double min, double max);
  std::vector<std::int64_t> integers(std::string_view key, std::int64_t min, std::int64_t max);
  std::vector<std::string> strings(std::string_view key);

  // Marks the key as read and returns its raw value (for sections parsed elsewhere).
  nlohmann::json& raw(std::string_view key);
  // Marks a key as known without reading it (e.g. "comment").
  void ignore(std::string_view key);

  // Throws InputError for the first key that no accessor read, listing the keys that were read
  // or declared. Keys starting with "_" and the key "comment" are always allowed (annotations,
  // sources of calibrated numbers).
  void finish();
  // Throws InputError for the first key not in `known` (annotations allowed as in finish()), before
  // anything is read: a misspelt key is then named as unknown, not as the key it was meant to be
  // reported missing.
  void only_keys(std::initializer_list<std::string_view> known) const;

 private:
  nlohmann::json& at(std::string_view key);  // required: InputError when missing
  [[noreturn]] void fail(std::string_view key, const std::string& what) const;
  std::string type_name(const nlohmann::json& v) const;

  nlohmann::json* j_;
  std::string path_;
  std::set<std::string, std::less<>> read_;
};

// Type name for messages ("a string", "an object", ...).
std::string json_type_name(const nlohmann::json& v);

}  // namespace mlsim
