#pragma once
// A timeline of what ran where, for Perfetto (ui.perfetto.dev) or chrome://tracing: the scenario's
// `output.trace: true` asks for it, and the results writer puts it beside summary.json as
// trace.json. Models add spans (a serving replica's iterations per pipeline stage, ...) through
// ModelEnv::trace, which is null when the scenario did not ask: a model checks it and pays
// nothing otherwise.
//
// Streamed: each span is appended to a spill file as it ends (Chrome's JSON array format, one
// event per line), so memory does not grow with the run. Times are the simulated clock,
// microseconds with nanosecond digits written from integers: the same run writes the same bytes.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string_view>

#include "sim_core/base/temporary_files.hpp"
#include "sim_core/base/time.hpp"

namespace mlsim {

// A finished trace file in the temporary folder, removed when the last owner lets go.
class TraceFile {
 public:
  explicit TraceFile(std::unique_ptr<TemporaryFile> file) : file_(std::move(file)) {}
  ~TraceFile();
  TraceFile(const TraceFile&) = delete;
  TraceFile& operator=(const TraceFile&) = delete;
  const std::filesystem::path& path() const { return file_->path(); }

 private:
  std::unique_ptr<TemporaryFile> file_;
};

class SpanTrace {
 public:
  // Spills to a new file in the system's temporary folder (removed with this object unless
  // taken by release_file(), and on a fatal signal).
  SpanTrace();
  ~SpanTrace();
  SpanTrace(const SpanTrace&) = delete;
  SpanTrace& operator=(const SpanTrace&) = delete;

  // A complete span [start, end) on track (`process`, `thread`): Perfetto draws one row per
  // thread, grouped by process. `args` is a JSON object's text ("{}" or e.g. "{\"tokens\":
  // 512}"), written as given.
  void span(std::string_view name, std::string_view category, Time start, Time end,
            std::uint32_t process, std::uint32_t thread, std::string_view args = "{}");
  // Names shown for a process or thread row (metadata events).
  void name_process(std::uint32_t process, std::string_view name);
  void name_thread(std::uint32_t process, std::uint32_t thread, std::string_view name);

  std::uint64_t spans() const { return spans_; }
  // Ends the array and hands the finished file over.
  std::shared_ptr<const TraceFile> release_file();

 private:
  void begin_event();
  std::unique_ptr<TemporaryFile> file_;
  std::ofstream out_;
  std::uint64_t spans_ = 0;
  bool first_ = true;
};

}  // namespace mlsim
