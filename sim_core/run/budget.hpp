#pragma once
// Resource budgets: what a run may cost, checked before it starts and watched while it runs.
//
// Before: each model estimates its work from its parameters (events, network transfers, memory),
// naming the scenario key that drives it; the runner adds the scenario document's own memory. An
// estimate above the budget is an InputError naming that key and the option that raises the
// budget, so a value that asks for hours or gigabytes is refused before anything runs.
// While running: the engine's periodic hook stops a run that processes more events than its
// budget, or whose resident memory grows past it (LimitError: exit status 1, nothing written).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mlsim {

// The budget of one run, set by the CLI's --max-events and --max-memory (not part of the
// scenario: it limits what a run may cost on this machine, not what it simulates).
struct RunBudget {
  // [assumed] about 20 minutes at the engine's 8 M events/s on the project's 2-core machine; the
  // largest shipped run (the DSA study headline) processes 128 M events.
  std::uint64_t max_events = 10'000'000'000;
  // [assumed] a sixth of the 24 GiB development machine, so two runs and a build fit beside it;
  // the largest shipped run (embcache) holds about 220 MB.
  std::int64_t max_memory_bytes = std::int64_t{4} << 30;
};

// One term of an estimate: `amount` of events, transfers or bytes, explained, with the key a user
// changes to reduce it.
struct WorkTerm {
  double amount = 0;
  std::string what;  // "gradient pieces: 2 iterations x 4 workers x 161 M pieces of 1 B"
  std::string key;   // "system.partition"
};

// A model's estimate of its own work. Estimates are lower bounds where they can be (a count of
// things that certainly happen), so that a refusal is never a false alarm by more than a factor.
struct WorkEstimate {
  std::vector<WorkTerm> events;     // engine events
  std::vector<WorkTerm> transfers;  // network transfers (each at least one event as well)
  std::vector<WorkTerm> memory;     // bytes held at once

  double total_events() const;
  double total_transfers() const;
  double total_memory() const;
};

// Throws InputError at the key of the largest term when the estimate passes the budget: events
// or transfers above max_events, memory above max_memory_bytes. The message names the key to
// change and the option that raises the budget.
void check_budget(const WorkEstimate& estimate, const RunBudget& budget);

// Bytes the process holds now (resident set), from /proc/self/statm; 0 when unknown.
std::int64_t resident_bytes();
// The most the process has held (peak resident set, getrusage), 0 when unknown.
std::int64_t peak_resident_bytes();

// Approximate bytes a JSON document holds in memory (nlohmann: a 16-byte value per node, a
// 64-byte tree node per object member, string contents), counted without allocating.
double json_memory_bytes(const nlohmann::json& document);

}  // namespace mlsim
