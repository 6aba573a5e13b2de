#pragma once
// Job arrivals from a trace file: a CSV with a header row, one job per row. The time column is
// either seconds (any origin) or a "YYYY-MM-DD HH:MM:SS" timestamp (as in the Philly trace,
// ../shared/data/cluster_traces/philly/philly.csv, column "timestamp"); an optional column gives
// each job's worker count (Philly: "num_gpus").
//
// Rows are sorted by time (ties keep file order), the first `skip_rows` are dropped, and arrival
// times are offsets from the first kept row multiplied by `time_scale` (compressing a trace whose
// gaps are minutes into a simulation whose jobs last seconds).
#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "sim_core/base/time.hpp"

namespace mlsim::ina {

struct ArrivalTraceOptions {
  std::filesystem::path file;
  std::string time_column = "arrival_s";
  bool datetime = false;       // time column holds "YYYY-MM-DD HH:MM:SS" (UTC, no zone)
  std::string workers_column;  // empty: the trace gives no worker counts
  std::size_t skip_rows = 0;
  double time_scale = 1.0;
};

struct TraceArrival {
  Time at;
  int workers = 0;       // 0 = not in the trace
  std::size_t line = 0;  // in the file, for messages
};

// Returns at most `limit` arrivals. Throws InputError(where, "FILE:LINE: ...") for an unreadable
// file, a missing column or a malformed value.
std::vector<TraceArrival> read_arrival_trace(const ArrivalTraceOptions& options, std::size_t limit,
                                             const std::string& where);

}  // namespace mlsim::ina
