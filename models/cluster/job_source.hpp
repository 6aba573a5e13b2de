#pragma once
// Where jobs come from: a trace file read one row at a time (memory independent of its length),
// or a synthetic Poisson generator. Both hand out jobs in submission order.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/cluster/job.hpp"
#include "sim_core/engine/random.hpp"

namespace mlsim::cluster {

// Distinct user names in order of first appearance; a job carries the index.
class UserTable {
 public:
  int index_of(const std::string& name);
  const std::vector<std::string>& names() const { return names_; }

 private:
  std::map<std::string, int, std::less<>> index_;
  std::vector<std::string> names_;
};

class JobSource {
 public:
  virtual ~JobSource() = default;
  // The next job, or nullopt when there is none left.
  virtual std::optional<JobSpec> next() = 0;
  // Jobs this source will produce in all (for progress and checks).
  virtual std::uint64_t total() const = 0;
  virtual const UserTable& users() const = 0;
};

struct TraceOptions {
  std::filesystem::path file;
  std::string submit_column = "timestamp";
  bool datetime = true;  // "YYYY-MM-DD HH:MM:SS" (Philly); false: seconds (any origin)
  std::string duration_column = "duration";  // seconds on the reference GPU
  std::string gpus_column = "num_gpus";
  std::string user_column;      // empty: every job belongs to user "all"
  std::string gpu_type_column;  // empty: no type in the trace; else "NAME", "A|B" or "any"
  std::uint64_t limit = UINT64_MAX;
  double duration_scale = 1.0;  // multiplies every duration (shrinks a trace for quick runs)
  // Multiplies every submit offset: with the same duration_scale, a time-compressed trace whose
  // queueing scales exactly in the job-level mode (start-up times excepted).
  double submit_scale = 1.0;
};

// Reads a CSV trace with a header row. Rows must be sorted by submit time, so that the file can be
// streamed: the constructor scans the whole file once (checking every row, counting jobs) and
// throws InputError(where, "FILE:LINE: ...") for the first problem, so a bad trace fails before
// the run. `gpu_types` names the pool's types, for the optional type column.
class TraceJobSource final : public JobSource {
 public:
  TraceJobSource(TraceOptions options, std::vector<std::string> gpu_types, std::string where);
  std::optional<JobSpec> next() override;
  std::uint64_t total() const override { return total_; }
  const UserTable& users() const override { return users_; }

 private:
  struct Columns {
    std::size_t submit = 0, duration = 0, gpus = 0, user = 0, type = 0, count = 0;
  };
  void open();  // (re)opens the file and reads the header
  // Parses one data line into `job`; false for a blank line.
  bool parse(const std::string& line, std::size_t line_no, JobSpec& job, double& submit_s);

  TraceOptions o_;
  std::vector<std::string> gpu_types_;
  std::string where_;
  std::ifstream in_;
  Columns col_;
  std::size_t line_no_ = 0;
  std::uint64_t produced_ = 0, total_ = 0;
  double origin_s_ = 0;
  UserTable users_;
};

// Jobs listed in the scenario (workload.jobs.list), already checked and in submit order; ids
// are assigned in that order.
class ListJobSource final : public JobSource {
 public:
  ListJobSource(std::vector<JobSpec> jobs, UserTable users);
  std::optional<JobSpec> next() override;
  std::uint64_t total() const override { return jobs_.size(); }
  const UserTable& users() const override { return users_; }

 private:
  std::vector<JobSpec> jobs_;
  UserTable users_;
  std::size_t next_ = 0;
};

struct PoissonOptions {
  std::uint64_t jobs = 100;
  Time mean_interarrival = Time::s(60);
  Time mean_duration = Time::s(3600);  // exponential, on the reference GPU
  std::vector<int> gpus{1};            // each job draws one uniformly
  int users = 1;
};

class PoissonJobSource final : public JobSource {
 public:
  PoissonJobSource(PoissonOptions options, RandomStream stream);
  std::optional<JobSpec> next() override;
  std::uint64_t total() const override { return o_.jobs; }
  const UserTable& users() const override { return users_; }

 private:
  PoissonOptions o_;
  RandomStream rng_;
  UserTable users_;
  std::uint64_t produced_ = 0;
  Time clock_ = Time::zero();
};

// Parses a type cell: "", "any" or "*" = 0 (any type); else names separated by '|'. Throws
// InputError(where, ...) naming the known types for an unknown name.
TypeMask parse_type_list(const std::string& cell, const std::vector<std::string>& gpu_types,
                         const std::string& where);

}  // namespace mlsim::cluster
