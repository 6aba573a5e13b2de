#pragma once
// The switch-side aggregation policy (SwitchML, ATP, DSA) as a strategy over the switch's
// aggregator pool: together they are the switch program (sim_core/network/switch_program.hpp)
// hosted on the ToR switch node, on either data path (data_path.hpp). What the program can do
// with packets is SwitchPorts, implemented by the cluster that owns the paths and hosts.
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "models/ina/counters.hpp"
#include "models/ina/packet.hpp"
#include "sim_core/network/aggregator_slots.hpp"
#include "sim_core/network/switch_program.hpp"

namespace mlsim::ina {

class SwitchPorts {
 public:
  virtual ~SwitchPorts() = default;
  virtual Time now() const = 0;
  virtual int workers_of(std::uint16_t job) const = 0;
  // The contributors an aggregator of the job completes with at this switch: every worker at
  // the job's one aggregation switch; at a rack's switch under two-level aggregation
  // (ina_fabric.hpp), only that rack's workers.
  virtual std::uint32_t full_of(std::uint16_t job) const { return full_bitmap(workers_of(job)); }
  virtual void to_ps(const Packet& p) = 0;                       // to the job's PS
  virtual void multicast(const Packet& p) = 0;                   // to every worker of the job
  virtual void to_worker(const Packet& p, std::uint16_t w) = 0;  // to one worker
  virtual InaCounters& counters() = 0;
};

// The pool claim for a packet's chunk.
inline ChunkClaim claim_of(const Packet& p) {
  return ChunkClaim{p.job, p.seq, p.packets, p.priority};
}

// What an aggregator holds, as a packet of `kind`: a partial on its way to the parameter server
// or a result on its way to the workers.
inline Packet packet_of(const Aggregator& a, PacketKind kind) {
  Packet out;
  out.kind = kind;
  out.job = a.job;
  out.seq = a.seq;
  out.sum = a.sum;
  out.bitmap = a.bitmap;
  out.packets = a.packets;
  out.priority = a.priority;
  return out;
}

class AggregationPolicy : public SwitchProgram<Packet> {
 public:
  AggregationPolicy(SwitchPorts& ports, std::size_t pool_units)
      : ports_(ports), pool_(pool_units, ports.now()) {}
  AggregationPolicy(const AggregationPolicy&) = delete;
  AggregationPolicy& operator=(const AggregationPolicy&) = delete;

  virtual std::string_view name() const = 0;
  virtual bool uses_parameter_server() const = 0;
  // Slot-bound senders (SwitchML): chunks a worker may have outstanding; 0 = window-based sender.
  virtual std::uint32_t slot_window(std::uint16_t /*job*/) const { return 0; }
  virtual void job_started(std::uint16_t /*job*/) {}
  virtual void job_finished(std::uint16_t /*job*/) {}
  // The job was aborted (its watchdog fired): the control plane frees every aggregator it holds
  // and the program drops whatever of it still arrives (counted in packets_after_abort). Then
  // job_finished runs as for a job that ended.
  void job_aborted(std::uint16_t job) {
    if (aborted_.size() <= job) aborted_.resize(job + 1u, false);
    aborted_[job] = true;
    for (std::size_t i = 0; i < pool_.size(); ++i)
      if (pool_.at(i).held && pool_.at(i).job == job) pool_.release(i, ports_.now());
    job_finished(job);
  }

  // A worker's gradient burst reached the switch pipeline.
  virtual void on_gradient(const Packet& p) = 0;
  // A PS result on its way to the workers (ATP and DSA release the aggregator here).
  virtual void on_result(const Packet& p) { ports_.multicast(p); }

  // SwitchProgram: everything addressed to the switch. Workers send gradients (and, under
  // two-level aggregation, a rack's switch sends its partials and whatever it could not
  // aggregate to the next level, which aggregates a partial as it does a gradient: its bitmap
  // names the rack's workers it holds); a PS sends
  // results (multicast, releasing the chunk's aggregator) and messages for one worker (resend
  // requests, and re-answers to one worker's retransmission, whose aggregator was released by
  // the first result or flushed by the retransmission), which the switch forwards.
  void on_message(const Packet& p, NodeId /*from*/) final {
    if (p.job < aborted_.size() && aborted_[p.job]) {
      ports_.counters().packets_after_abort += p.packets;
      return;
    }
    if (p.kind == PacketKind::kGradient || p.kind == PacketKind::kPartial)
      on_gradient(p);
    else if (p.kind == PacketKind::kResult && !p.resend)
      on_result(p);
    else
      ports_.to_worker(p, p.worker);
  }
  Time pipeline_latency() const final { return pipeline_latency_; }
  void set_pipeline_latency(Time t) { pipeline_latency_ = t; }

  AggregatorSlots& pool() { return pool_; }
  const AggregatorSlots& pool() const { return pool_; }

 protected:
  SwitchPorts& ports_;
  AggregatorSlots pool_;
  Time pipeline_latency_ = Time::zero();

 private:
  std::vector<bool> aborted_;  // by job; empty until a job is aborted
};

}  // namespace mlsim::ina
