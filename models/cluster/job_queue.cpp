#include "models/cluster/job_queue.hpp"

#include <algorithm>

#include "sim_core/base/error.hpp"

namespace mlsim::cluster {

void JobQueue::push(QueuedJob job) {
  const std::uint64_t id = job.spec.id;
  const auto user = static_cast<std::size_t>(job.spec.user);
  MLSIM_CHECK(jobs_.emplace(id, std::move(job)).second, "job queued twice");
  if (by_user_.size() <= user) by_user_.resize(user + 1);
  auto& ids = by_user_[user];
  ids.insert(std::lower_bound(ids.begin(), ids.end(), id), id);
}

void JobQueue::erase(std::uint64_t id) {
  auto it = jobs_.find(id);
  MLSIM_CHECK(it != jobs_.end(), "erasing a job that is not queued");
  auto& ids = by_user_[static_cast<std::size_t>(it->second.spec.user)];
  // Started jobs are mostly near the front of their user's list.
  ids.erase(std::find(ids.begin(), ids.end(), id));
  jobs_.erase(it);
}

}  // namespace mlsim::cluster
