#include "models/cluster/job_source.hpp"

#include <cmath>

#include "sim_core/base/error.hpp"
#include "sim_core/base/input_file.hpp"
#include "sim_core/base/text_fields.hpp"

namespace mlsim::cluster {
int UserTable::index_of(const std::string& name) {
  if (auto it = index_.find(name); it != index_.end()) return it->second;
  const int i = static_cast<int>(names_.size());
  index_.emplace(name, i);
  names_.push_back(name);
  return i;
}

TypeMask parse_type_list(const std::string& cell, const std::vector<std::string>& gpu_types,
                         const std::string& where) {
  if (cell.empty() || cell == "any" || cell == "*") return 0;
  TypeMask mask = 0;
  std::size_t begin = 0;
  while (begin <= cell.size()) {
    const std::size_t bar = std::min(cell.find('|', begin), cell.size());
    const std::string name = cell.substr(begin, bar - begin);
    std::size_t i = 0;
    while (i < gpu_types.size() && gpu_types[i] != name) ++i;
    if (i == gpu_types.size()) {
      std::string known;
      for (const auto& t : gpu_types) known += (known.empty() ? "" : ", ") + t;
      throw InputError(where, "GPU type '" + name + "' is not in the node pool (" + known + ")");
    }
    mask |= TypeMask{1} << i;
    begin = bar + 1;
  }
  return mask;
}

TraceJobSource::TraceJobSource(TraceOptions options, std::vector<std::string> gpu_types,
                               std::string where)
    : o_(std::move(options)), gpu_types_(std::move(gpu_types)), where_(std::move(where)) {
  // The checking scan: every row once, nothing kept but the count and the user names.
  open();
  std::string line;
  double last_s = -INFINITY;
  JobSpec job;
  double submit_s = 0;
  while (total_ < o_.limit && std::getline(in_, line)) {
    ++line_no_;
    if (!parse(line, line_no_, job, submit_s)) continue;
    if (submit_s < last_s)
      throw InputError(where_, o_.file.string() + ":" + std::to_string(line_no_) +
                                   ": submit times go backwards; the trace must be sorted by "
                                   "submit time (it is streamed)");
    if (total_ == 0) origin_s_ = submit_s;
    last_s = submit_s;
    ++total_;
  }
  users_ = UserTable{};  // the run assigns indices again, in the same order
  open();
}

void TraceJobSource::open() {
  const std::string name = o_.file.string();
  in_ = open_input_file(o_.file, where_, "job trace");
  std::string line;
  if (!std::getline(in_, line)) throw InputError(where_, name + ":1: empty file (needs a header)");
  line_no_ = 1;
  const std::vector<std::string> header = split_csv_line(line);
  auto column = [&](const std::string& wanted) -> std::size_t {
    for (std::size_t i = 0; i < header.size(); ++i)
      if (header[i] == wanted) return i;
    throw InputError(where_, name + ":1: no column '" + wanted + "' in the header");
  };
  col_.count = header.size();
  col_.submit = column(o_.submit_column);
  col_.duration = column(o_.duration_column);
  col_.gpus = column(o_.gpus_column);
  if (!o_.user_column.empty()) col_.user = column(o_.user_column);
  if (!o_.gpu_type_column.empty()) col_.type = column(o_.gpu_type_column);
  produced_ = 0;
}

bool TraceJobSource::parse(const std::string& line, std::size_t n, JobSpec& job, double& submit_s) {
  if (line.empty() || line == "\r") return false;
  auto fail = [&](const std::string& what) {
    return InputError(where_, o_.file.string() + ":" + std::to_string(n) + ": " + what);
  };
  if (line.find('"') != std::string::npos) throw fail("quoted fields are not supported");
  const std::vector<std::string> cells = split_csv_line(line);
  if (cells.size() != col_.count)
    throw fail(std::to_string(cells.size()) + " fields, the header has " +
               std::to_string(col_.count));
  const std::string& t = cells[col_.submit];
  if (o_.datetime) {
    const auto seconds = parse_whole_second_datetime(t);
    if (!seconds)
      throw fail("'" + t + "' in column '" + o_.submit_column +
                 "' is not a YYYY-MM-DD HH:MM:SS time");
    submit_s = *seconds;
  } else if (const auto seconds = parse_finite_number(t)) {
    submit_s = *seconds;
  } else {
    throw fail("'" + t + "' in column '" + o_.submit_column + "' is not a number of seconds");
  }
  const auto duration = parse_finite_number(cells[col_.duration]);
  if (!duration || *duration <= 0 || *duration > 1e9)
    throw fail("'" + cells[col_.duration] + "' in column '" + o_.duration_column +
               "' is not a duration in seconds in (0, 1e9]");
  const auto gpus = parse_finite_number(cells[col_.gpus]);
  if (!gpus || *gpus < 1 || *gpus > 1e6 || *gpus != std::floor(*gpus))
    throw fail("'" + cells[col_.gpus] + "' in column '" + o_.gpus_column +
               "' is not a whole number of GPUs in [1, 1e6]");
  job.gpus = static_cast<int>(*gpus);
  job.work = Time::from_seconds(*duration * o_.duration_scale);
  if (job.work <= Time::zero()) job.work = Time::ns(1);
  job.user = users_.index_of(o_.user_column.empty() ? std::string("all") : cells[col_.user]);
  job.types = o_.gpu_type_column.empty()
                  ? 0
                  : parse_type_list(cells[col_.type], gpu_types_,
                                    where_ + " (" + o_.file.string() + ":" + std::to_string(n) +
                                        ", column '" + o_.gpu_type_column + "')");
  job.line = n;
  return true;
}

std::optional<JobSpec> TraceJobSource::next() {
  if (produced_ >= total_) return std::nullopt;
  std::string line;
  JobSpec job;
  double submit_s = 0;
  while (std::getline(in_, line)) {
    ++line_no_;
    if (!parse(line, line_no_, job, submit_s)) continue;
    if (produced_ == 0) origin_s_ = submit_s;
    job.id = produced_++;
    job.submit = Time::from_seconds((submit_s - origin_s_) * o_.submit_scale);
    return job;
  }
  return std::nullopt;
}

ListJobSource::ListJobSource(std::vector<JobSpec> jobs, UserTable users)
    : jobs_(std::move(jobs)), users_(std::move(users)) {
  for (std::size_t i = 0; i < jobs_.size(); ++i) {
    jobs_[i].id = i;
    MLSIM_CHECK(i == 0 || jobs_[i - 1].submit <= jobs_[i].submit, "a job list out of order");
  }
}

std::optional<JobSpec> ListJobSource::next() {
  if (next_ >= jobs_.size()) return std::nullopt;
  return jobs_[next_++];
}

PoissonJobSource::PoissonJobSource(PoissonOptions options, RandomStream stream)
    : o_(std::move(options)), rng_(stream) {
  for (int u = 0; u < o_.users; ++u) users_.index_of("user" + std::to_string(u));
}

std::optional<JobSpec> PoissonJobSource::next() {
  if (produced_ >= o_.jobs) return std::nullopt;
  JobSpec job;
  job.id = produced_;
  // The first job arrives at 0, as a trace's first row does.
  if (produced_ > 0)
    clock_ += Time::from_seconds(rng_.exponential(1.0 / o_.mean_interarrival.seconds()));
  job.submit = clock_;
  job.gpus = o_.gpus[rng_.below(o_.gpus.size())];
  job.work = Time::from_seconds_ceil(rng_.exponential(1.0 / o_.mean_duration.seconds()));
  if (job.work <= Time::zero()) job.work = Time::ns(1);
  job.user = static_cast<int>(rng_.below(static_cast<std::uint64_t>(o_.users)));
  ++produced_;
  return job;
}

}  // namespace mlsim::cluster
