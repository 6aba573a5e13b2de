#include "models/ina/switchml_policy.hpp"

#include "sim_core/base/error.hpp"

namespace mlsim::ina {

SwitchMlPolicy::SwitchMlPolicy(SwitchPorts& ports, std::size_t slot_units, int partitions,
                               int max_jobs)
    : AggregationPolicy(ports, 2 * slot_units),
      slots_per_job_(static_cast<std::uint32_t>(slot_units / static_cast<std::size_t>(partitions))),
      partition_of_job_(static_cast<std::size_t>(max_jobs), -1),
      partition_in_use_(static_cast<std::size_t>(partitions), false) {
  MLSIM_CHECK(slots_per_job_ > 0, "SwitchML partition without a slot");
}

bool SwitchMlPolicy::has_free_partition() const {
  for (const bool used : partition_in_use_)
    if (!used) return true;
  return false;
}

void SwitchMlPolicy::job_started(std::uint16_t job) {
  if (job >= partition_of_job_.size()) partition_of_job_.resize(job + 1u, -1);
  for (std::size_t i = 0; i < partition_in_use_.size(); ++i) {
    if (!partition_in_use_[i]) {
      partition_in_use_[i] = true;
      partition_of_job_.at(job) = static_cast<int>(i);
      return;
    }
  }
  MLSIM_CHECK(false, "no free SwitchML partition for a starting job");
}

void SwitchMlPolicy::job_finished(std::uint16_t job) {
  const int part = partition_of_job_.at(job);
  MLSIM_CHECK(part >= 0, "finishing a job without a partition");
  const std::size_t base = 2 * static_cast<std::size_t>(part) * slots_per_job_;
  for (std::size_t i = base; i < base + 2 * slots_per_job_; ++i)
    if (pool_.at(i).held) pool_.release(i, ports_.now());
  partition_in_use_[static_cast<std::size_t>(part)] = false;
  partition_of_job_[job] = -1;
}

void SwitchMlPolicy::on_gradient(const Packet& p) {
  const int part = p.job < partition_of_job_.size() ? partition_of_job_[p.job] : -1;
  if (part < 0) {
    // The job has finished and given its partition back. Only a retransmission can still be on
    // its way: under loss, workers that waited for the same chunk time out together, and the
    // first resend to arrive completes the chunk; the others may reach the switch after every
    // worker has the result and the job has ended (issue 17, defect 2). Nobody waits for an
    // answer; drop it.
    MLSIM_CHECK(p.resend, "a first transmission of a job without a SwitchML partition");
    ++ports_.counters().late_retransmissions;
    return;
  }
  const std::uint64_t slot = p.seq % slots_per_job_;
  const std::uint64_t copy = (p.seq / slots_per_job_) % 2;
  const std::size_t i = 2 * (static_cast<std::size_t>(part) * slots_per_job_ + slot) + copy;
  const Aggregator& a = pool_.at(i);
  if (a.owned_by(p.job, p.seq)) {
    if (a.bitmap & p.bitmap) {
      // A retransmission: answer with the kept result if there is one.
      if (a.complete) {
        Packet r = packet_of(a, PacketKind::kResult);
        r.worker = p.worker;
        r.resend = true;
        ports_.to_worker(r, p.worker);
      }
      return;
    }
  } else if (a.held && a.seq > p.seq) {
    // A retransmission of a chunk whose copy moved on to seq + 2*slots: someone sent that only
    // after every worker (this one too) had the result of seq. Nothing to answer.
    MLSIM_CHECK(p.resend, "a first transmission behind its slot copy");
    return;
  } else {
    // This copy last held chunk seq - 2*slots, whose result every worker has: each worker sent
    // chunk seq - slots only after receiving it. The copy can be overwritten. A retransmission
    // lands here when every earlier packet of its chunk was lost on the way.
    if (a.held) {
      MLSIM_CHECK(a.job == p.job && a.seq < p.seq, "SwitchML slot copy reused out of order");
      pool_.release(i, ports_.now());
    }
    pool_.claim(i, claim_of(p), ports_.now());
  }
  ports_.counters().aggregated_packets += p.packets;
  if (pool_.add(i, p.job, p.seq, p.bitmap, p.sum, full_bitmap(ports_.workers_of(p.job)),
                ports_.now())) {
    ports_.multicast(packet_of(pool_.at(i), PacketKind::kResult));
  }
}

}  // namespace mlsim::ina
