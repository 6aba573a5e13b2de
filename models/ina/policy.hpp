#pragma once
// The switch-side aggregation policy (SwitchML, ATP, DSA) as a strategy, and what it can do with
// packets (SwitchPorts, implemented by the cluster that owns links and hosts).
#include <cstdint>
#include <memory>
#include <string_view>

#include "models/ina/aggregator_pool.hpp"
#include "models/ina/counters.hpp"
#include "models/ina/packet.hpp"

namespace mlsim::ina {

class SwitchPorts {
 public:
  virtual ~SwitchPorts() = default;
  virtual Time now() const = 0;
  virtual int workers_of(std::uint16_t job) const = 0;
  virtual void to_ps(const Packet& p) = 0;                       // to the job's PS
  virtual void multicast(const Packet& p) = 0;                   // to every worker of the job
  virtual void to_worker(const Packet& p, std::uint16_t w) = 0;  // to one worker
  virtual InaCounters& counters() = 0;
};

class AggregationPolicy {
 public:
  AggregationPolicy(SwitchPorts& ports, std::size_t pool_units)
      : ports_(ports), pool_(pool_units, ports.now()) {}
  virtual ~AggregationPolicy() = default;
  AggregationPolicy(const AggregationPolicy&) = delete;
  AggregationPolicy& operator=(const AggregationPolicy&) = delete;

  virtual std::string_view name() const = 0;
  virtual bool uses_parameter_server() const = 0;
  // Slot-bound senders (SwitchML): chunks a worker may have outstanding; 0 = window-based sender.
  virtual std::uint32_t slot_window(std::uint16_t /*job*/) const { return 0; }
  virtual void job_started(std::uint16_t /*job*/) {}
  virtual void job_finished(std::uint16_t /*job*/) {}

  // A worker's gradient burst reached the switch pipeline.
  virtual void on_gradient(const Packet& p) = 0;
  // A PS result on its way to the workers (ATP and DSA release the aggregator here).
  virtual void on_result(const Packet& p) { ports_.multicast(p); }

  AggregatorPool& pool() { return pool_; }
  const AggregatorPool& pool() const { return pool_; }

 protected:
  SwitchPorts& ports_;
  AggregatorPool pool_;
};

}  // namespace mlsim::ina
