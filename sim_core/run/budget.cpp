#include "sim_core/run/budget.hpp"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "sim_core/base/error.hpp"

namespace mlsim {
namespace {

double sum(const std::vector<WorkTerm>& terms) {
  double s = 0;
  for (const auto& t : terms) s += t.amount;
  return s;
}

const WorkTerm& largest(const std::vector<WorkTerm>& terms) {
  return *std::max_element(terms.begin(), terms.end(), [](const WorkTerm& a, const WorkTerm& b) {
    return a.amount < b.amount;
  });
}

std::string gib(double bytes) {
  return fmt::format("{:.3g} GiB", bytes / (1u << 30));
}

}  // namespace

double WorkEstimate::total_events() const {
  return sum(events);
}
double WorkEstimate::total_transfers() const {
  return sum(transfers);
}
double WorkEstimate::total_memory() const {
  return sum(memory);
}

void check_budget(const WorkEstimate& e, const RunBudget& budget) {
  const auto limit = static_cast<double>(budget.max_events);
  auto refuse_count = [&](const std::vector<WorkTerm>& terms, const char* what) {
    const WorkTerm& t = largest(terms);
    throw InputError(t.key, fmt::format("this run would process about {:.3g} {} (largest part: "
                                        "{:.3g} for {}), more than its budget of {:.3g}; "
                                        "change {} or raise the budget with --max-events",
                                        sum(terms), what, t.amount, t.what, limit, t.key));
  };
  if (!e.events.empty() && e.total_events() > limit) refuse_count(e.events, "events");
  if (!e.transfers.empty() && e.total_transfers() > limit) refuse_count(e.transfers, "transfers");
  const auto mem_limit = static_cast<double>(budget.max_memory_bytes);
  if (!e.memory.empty() && e.total_memory() > mem_limit) {
    const WorkTerm& t = largest(e.memory);
    throw InputError(t.key, fmt::format("this run would hold about {} (largest part: {} for {}), "
                                        "more than its budget of {}; change {} or raise the "
                                        "budget with --max-memory",
                                        gib(e.total_memory()), gib(t.amount), t.what,
                                        gib(mem_limit), t.key.empty() ? "the scenario" : t.key));
  }
}

std::int64_t resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  long long pages = 0, resident = 0;
  const int n = std::fscanf(f, "%lld %lld", &pages, &resident);
  std::fclose(f);
  if (n != 2) return 0;
  return static_cast<std::int64_t>(resident) * ::sysconf(_SC_PAGESIZE);
}

std::int64_t peak_resident_bytes() {
  struct rusage usage {};
  if (::getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return static_cast<std::int64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

double json_memory_bytes(const nlohmann::json& document) {
  // Iterative: a document's depth is bounded, but its breadth is not.
  double bytes = 0;
  std::vector<const nlohmann::json*> todo{&document};
  while (!todo.empty()) {
    const nlohmann::json* j = todo.back();
    todo.pop_back();
    bytes += 16;  // the value itself
    if (j->is_object()) {
      for (auto it = j->begin(); it != j->end(); ++it) {
        bytes += 64 + static_cast<double>(it.key().capacity());  // map node and key
        todo.push_back(&it.value());
      }
    } else if (j->is_array()) {
      for (const auto& v : *j) todo.push_back(&v);
    } else if (j->is_string()) {
      bytes += 32 + static_cast<double>(j->get_ref<const std::string&>().capacity());
    }
  }
  return bytes;
}

}  // namespace mlsim
