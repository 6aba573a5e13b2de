#pragma once
// Small parsers for the text fields of trace files, shared by the models that read traces
// (serving's Azure request traces, ina's job-arrival traces, embcache's sample files, cluster's
// job traces).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mlsim {

// Splits one line of a plain CSV (no quoting) at commas; a trailing '\r' is dropped and a
// trailing comma gives a last empty cell.
std::vector<std::string> split_csv_line(std::string_view line);

// "YYYY-MM-DD HH:MM:SS" or with 'T' for the space, optionally followed by ".fraction" (up to 9
// digits), as nanoseconds since 1970-01-01 00:00:00 (proleptic Gregorian, no time zone);
// nullopt when the text is not such a timestamp or names no real date ("2023-02-30").
std::optional<std::int64_t> parse_timestamp_ns(std::string_view text);

// A whole cell as a finite decimal number ("12", "0.5", "1e3"); nullopt for anything else.
std::optional<double> parse_finite_number(std::string_view text);

// "YYYY-MM-DD HH:MM:SS" exactly, as the Philly trace writes submit times, in whole seconds since
// 1970-01-01; nullopt otherwise.
std::optional<double> parse_whole_second_datetime(std::string_view text);

}  // namespace mlsim
