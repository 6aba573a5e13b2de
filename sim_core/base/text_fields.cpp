#include "sim_core/base/text_fields.hpp"

#include <charconv>
#include <chrono>
#include <cmath>

namespace mlsim {

std::vector<std::string> split_csv_line(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  std::vector<std::string> cells;
  for (;;) {
    const auto comma = line.find(',');
    cells.emplace_back(line.substr(0, comma));
    if (comma == std::string_view::npos) break;
    line.remove_prefix(comma + 1);
  }
  return cells;
}

namespace {
std::optional<std::int64_t> digits(std::string_view s) {
  std::int64_t v = 0;
  if (s.empty() || s.front() == '-' || s.front() == '+') return std::nullopt;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}
}  // namespace

std::optional<std::int64_t> parse_timestamp_ns(std::string_view t) {
  if (t.size() < 19 || t[4] != '-' || t[7] != '-' || (t[10] != ' ' && t[10] != 'T') ||
      t[13] != ':' || t[16] != ':')
    return std::nullopt;
  const auto y = digits(t.substr(0, 4)), mo = digits(t.substr(5, 2)), d = digits(t.substr(8, 2)),
             h = digits(t.substr(11, 2)), mi = digits(t.substr(14, 2)), s = digits(t.substr(17, 2));
  if (!y || !mo || !d || !h || !mi || !s || *h > 23 || *mi > 59 || *s > 60) return std::nullopt;
  const std::chrono::year_month_day date{std::chrono::year{static_cast<int>(*y)},
                                         std::chrono::month{static_cast<unsigned>(*mo)},
                                         std::chrono::day{static_cast<unsigned>(*d)}};
  if (!date.ok()) return std::nullopt;
  std::int64_t frac_ns = 0;
  if (t.size() > 19) {
    if (t[19] != '.' || t.size() == 20 || t.size() > 29) return std::nullopt;
    const auto f = digits(t.substr(20));
    if (!f) return std::nullopt;
    frac_ns = *f;
    for (auto i = t.size() - 20; i < 9; ++i) frac_ns *= 10;
  }
  const std::int64_t days = std::chrono::sys_days{date}.time_since_epoch().count();
  return ((days * 24 + *h) * 60 + *mi) * 60'000'000'000LL + *s * 1'000'000'000LL + frac_ns;
}

std::optional<double> parse_finite_number(std::string_view text) {
  double v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || p != end || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<double> parse_whole_second_datetime(std::string_view text) {
  if (text.size() != 19) return std::nullopt;
  const auto ns = parse_timestamp_ns(text);
  if (!ns) return std::nullopt;
  return static_cast<double>(*ns / 1'000'000'000);
}

}  // namespace mlsim
