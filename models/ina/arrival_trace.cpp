#include "models/ina/arrival_trace.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>

#include "sim_core/base/error.hpp"
#include "sim_core/base/input_file.hpp"
#include "sim_core/base/text_fields.hpp"

namespace mlsim::ina {
std::vector<TraceArrival> read_arrival_trace(const ArrivalTraceOptions& o, std::size_t limit,
                                             const std::string& where) {
  const std::string name = o.file.string();
  std::ifstream in = open_input_file(o.file, where, "arrival trace");
  auto fail = [&](std::size_t line, const std::string& what) -> InputError {
    return InputError(where, name + ":" + std::to_string(line) + ": " + what);
  };

  std::string line;
  if (!std::getline(in, line)) throw fail(1, "empty file (needs a header row)");
  const std::vector<std::string> header = split_csv_line(line);
  auto column = [&](const std::string& wanted) -> std::size_t {
    const auto it = std::find(header.begin(), header.end(), wanted);
    if (it == header.end()) throw fail(1, "no column '" + wanted + "' in the header");
    return static_cast<std::size_t>(it - header.begin());
  };
  const std::size_t time_col = column(o.time_column);
  const bool has_workers = !o.workers_column.empty();
  const std::size_t workers_col = has_workers ? column(o.workers_column) : 0;

  struct Row {
    double t;
    int workers;
    std::size_t line;
  };
  std::vector<Row> rows;
  for (std::size_t n = 2; std::getline(in, line); ++n) {
    if (line.empty() || line == "\r") continue;
    if (line.find('"') != std::string::npos) throw fail(n, "quoted fields are not supported");
    const std::vector<std::string> cells = split_csv_line(line);
    if (cells.size() != header.size())
      throw fail(n, std::to_string(cells.size()) + " fields, the header has " +
                        std::to_string(header.size()));
    Row r{0, 0, n};
    const std::string& t = cells[time_col];
    const auto time = o.datetime ? parse_whole_second_datetime(t) : parse_finite_number(t);
    if (!time)
      throw fail(n, "'" + t + "' in column '" + o.time_column + "' is not " +
                        (o.datetime ? "a YYYY-MM-DD HH:MM:SS time" : "a number of seconds"));
    r.t = *time;
    if (has_workers) {
      const auto w = parse_finite_number(cells[workers_col]);
      if (!w || *w < 1 || *w != std::floor(*w))
        throw fail(n, "'" + cells[workers_col] + "' in column '" + o.workers_column +
                          "' is not a positive whole number");
      r.workers = *w > 1e6 ? 1'000'000 : static_cast<int>(*w);
    }
    rows.push_back(r);
  }
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.t < b.t; });
  std::vector<TraceArrival> out;
  if (o.skip_rows >= rows.size()) return out;
  const double origin = rows[o.skip_rows].t;
  for (std::size_t i = o.skip_rows; i < rows.size() && out.size() < limit; ++i)
    out.push_back(
        {Time::from_seconds((rows[i].t - origin) * o.time_scale), rows[i].workers, rows[i].line});
  return out;
}

}  // namespace mlsim::ina
