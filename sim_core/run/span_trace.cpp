#include "sim_core/run/span_trace.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <stdexcept>

#include "sim_core/base/error.hpp"

namespace mlsim {
namespace {

std::filesystem::path new_spill_path() {
  static std::atomic<std::uint64_t> counter{0};
  return std::filesystem::temp_directory_path() /
         fmt::format("mlsim-trace-{}-{}.json", ::getpid(), counter.fetch_add(1));
}

// Microseconds with nanosecond digits, from the integer clock (no floating-point rounding).
std::string micros(Time t) {
  const std::int64_t ns = t.count_ns();
  return fmt::format("{}.{:03}", ns / 1000, ns % 1000);
}

// A JSON string's body: names come from scenarios (replica names), so quote what JSON needs.
std::string escaped(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(static_cast<unsigned char>(c)));
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

SpanTrace::SpanTrace() : file_(std::make_unique<TemporaryFile>(new_spill_path())) {
  out_.open(file_->path(), std::ios::binary | std::ios::trunc);
  if (!out_)
    throw std::runtime_error("cannot create the trace spill file " + file_->path().string());
  out_ << "[";
}

SpanTrace::~SpanTrace() {
  if (file_) {
    out_.close();
    std::error_code ignored;
    std::filesystem::remove(file_->path(), ignored);
  }
}

void SpanTrace::begin_event() {
  MLSIM_CHECK(file_ != nullptr, "span added after the trace was released");
  out_ << (first_ ? "\n" : ",\n");
  first_ = false;
}

void SpanTrace::span(std::string_view name, std::string_view category, Time start, Time end,
                     std::uint32_t process, std::uint32_t thread, std::string_view args) {
  MLSIM_CHECK(end >= start, "a span ends before it starts");
  begin_event();
  out_ << fmt::format(
      R"({{"name":"{}","cat":"{}","ph":"X","ts":{},"dur":{},"pid":{},"tid":{},"args":{}}})",
      escaped(name), escaped(category), micros(start), micros(end - start), process, thread, args);
  ++spans_;
}

void SpanTrace::name_process(std::uint32_t process, std::string_view name) {
  begin_event();
  out_ << fmt::format(R"({{"name":"process_name","ph":"M","pid":{},"args":{{"name":"{}"}}}})",
                      process, escaped(name));
}

void SpanTrace::name_thread(std::uint32_t process, std::uint32_t thread, std::string_view name) {
  begin_event();
  out_ << fmt::format(
      R"({{"name":"thread_name","ph":"M","pid":{},"tid":{},"args":{{"name":"{}"}}}})", process,
      thread, escaped(name));
}

TraceFile::~TraceFile() {
  std::error_code ignored;
  std::filesystem::remove(file_->path(), ignored);
}

std::shared_ptr<const TraceFile> SpanTrace::release_file() {
  MLSIM_CHECK(file_ != nullptr, "the trace was released twice");
  out_ << "\n]\n";
  out_.close();
  if (!out_)
    throw std::runtime_error("cannot write the trace spill file " + file_->path().string());
  return std::make_shared<const TraceFile>(std::move(file_));
}

}  // namespace mlsim
