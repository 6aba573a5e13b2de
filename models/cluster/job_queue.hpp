#pragma once
// The waiting jobs, visited in submit order or in fair-share order (least decayed user usage
// first, submit order among equals). A visit touches only the jobs it reaches, so a scheduler
// pass that stops early costs little however long the queue is: jobs are kept by id (= submit
// order) and, per user, as id lists merged lazily by (usage, id).
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <queue>
#include <vector>

#include "models/cluster/fair_share.hpp"
#include "models/cluster/job.hpp"

namespace mlsim::cluster {

struct QueuedJob {
  JobSpec spec;
  int restarts = 0;
  std::optional<Time> first_reservation;
  // Requeued after its communication failed (no route between its hosts): passed over until
  // the links change, so that it is not placed again and again at the same instant on hosts
  // that cannot reach each other.
  bool held = false;
};

class JobQueue {
 public:
  // A job enters at its submit-order position (a requeued job goes back to its old place).
  void push(QueuedJob job);
  void erase(std::uint64_t id);
  std::size_t size() const { return jobs_.size(); }
  bool empty() const { return jobs_.empty(); }

  // Calls visit(QueuedJob&) in order until it returns false. The visitor must not push or erase.
  template <typename Visit>
  void visit_submit_order(Visit visit) {
    for (auto& [id, job] : jobs_)
      if (!visit(job)) return;
  }
  template <typename Visit>
  void visit_fair_share(const FairShare& usage, Visit visit);

 private:
  std::map<std::uint64_t, QueuedJob> jobs_;
  std::vector<std::deque<std::uint64_t>> by_user_;  // ids, increasing
};

template <typename Visit>
void JobQueue::visit_fair_share(const FairShare& usage, Visit visit) {
  struct Cursor {
    double usage;
    std::uint64_t id;
    std::size_t user, pos;
    bool operator>(const Cursor& o) const { return usage != o.usage ? usage > o.usage : id > o.id; }
  };
  std::priority_queue<Cursor, std::vector<Cursor>, std::greater<>> heap;
  for (std::size_t u = 0; u < by_user_.size(); ++u)
    if (!by_user_[u].empty())
      heap.push({usage.usage(static_cast<int>(u)), by_user_[u].front(), u, 0});
  while (!heap.empty()) {
    Cursor c = heap.top();
    heap.pop();
    if (!visit(jobs_.at(c.id))) return;
    if (++c.pos < by_user_[c.user].size()) {
      c.id = by_user_[c.user][c.pos];
      heap.push(c);
    }
  }
}

}  // namespace mlsim::cluster
