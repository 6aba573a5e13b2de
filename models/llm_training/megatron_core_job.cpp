#include "models/llm_training/megatron_core_job.hpp"

#include <algorithm>
#include <array>
#include <utility>

#include "models/training/policies.hpp"
#include "sim_core/base/error.hpp"
#include "sim_core/workload/flow_labels.hpp"

namespace mlsim::llm_training {

namespace {

std::vector<std::size_t> first_layers(const ParallelLayout& l) {
  std::vector<std::size_t> out;
  for (int s = 0; s <= l.pp; ++s) out.push_back(static_cast<std::size_t>(s * l.layers_per_stage));
  return out;
}

// Stage s's gradient bytes per GPU (the graph's: the first stage's alone when there is one).
std::int64_t stage_grads(const ParallelLayout& l, int s) {
  if (s == 0) return l.first_stage_grads.count;
  return s + 1 == l.pp ? l.last_stage_grads.count : l.middle_stage_grads.count;
}

// Per decoder layer, its share of its stage's gradient bytes as parameters of 1 byte each (the
// first layers of a stage take the remainder), TP copies counted as bytes per parameter.
std::vector<std::int64_t> layer_parameters(const ParallelLayout& l) {
  std::vector<std::int64_t> out;
  const auto per_stage = static_cast<std::int64_t>(l.layers_per_stage);
  for (int s = 0; s < l.pp; ++s) {
    const std::int64_t grads = stage_grads(l, s);
    for (std::int64_t k = 0; k < per_stage; ++k)
      out.push_back(grads / per_stage + (k < grads % per_stage ? 1 : 0));
  }
  return out;
}

// Core workers per TP group: the group itself when collapsed, else each of its GPUs.
std::size_t lanes_of(const ParallelLayout& l) {
  return l.collapse_tensor_parallel ? 1 : static_cast<std::size_t>(l.tp);
}

}  // namespace

MegatronCoreJob::MegatronCoreJob(Engine& engine, Network& network, Compute& compute,
                                 const ParallelLayout& layout, StageKernels kernels,
                                 std::vector<NodeId> hosts, MegatronCoreOptions options,
                                 std::function<void()> on_failed)
    : engine_(engine),
      network_(network),
      hardware_(compute.hardware()),
      costs_(options.costs),
      links_(options.links),
      layout_(layout),
      hosts_(std::move(hosts)),
      // A stage's replicas are its DP x lanes workers, replica t + lanes d (the rank order),
      // each with its own M micro-batches in the 1F1B order.
      schedule_(training::PipelineSchedule::Kind::kOneFOneB, first_layers(layout),
                std::vector<std::size_t>(static_cast<std::size_t>(layout.pp),
                                         static_cast<std::size_t>(layout.dp) * lanes_of(layout)),
                static_cast<std::size_t>(layout.pp * layout.dp) * lanes_of(layout),
                static_cast<std::size_t>(layout.micro_batches * layout.dp) * lanes_of(layout)),
      messages_(engine, network, {options.costs, {}, 0}, options.links),
      intra_(costs_),
      lanes_(lanes_of(layout)) {
  MLSIM_CHECK(hosts_.size() == static_cast<std::size_t>(layout.pp * layout.dp) * lanes_,
              "a Megatron job on the core needs one host per (stage, DP index) and, with TP not "
              "collapsed, per TP index");
  MLSIM_CHECK(layout.layers_per_stage >= 1, "a Megatron stage holds at least one layer");
  schedule_.set_sync_after_last_backward(true);
  schedule_.set_blocking_sends(true);
  training::JobSpec spec;
  spec.workers = hosts_;
  spec.parameters = layer_parameters(layout);
  spec.iterations = static_cast<std::size_t>(layout.iterations);
  job_ = std::make_unique<training::DataParallelJob>(engine, compute, spec);
  pricer_ = std::make_unique<MegatronOpPricer>(layout, std::move(kernels), compute, hosts_,
                                               options.costs, options.merge_op_steps,
                                               options.closed_form ? options.links : nullptr);
  for (NodeId h : hosts_) {
    const HostHardware* hw = compute.hardware().host(h);
    host_gpus_.push_back(hw != nullptr ? hw->gpus : 1);  // as the graph places its ranks
  }
  const training::TrainingPolicies& p = training::training_policies();
  // dp_sync: the ring all-reduce, or the distributed optimizer's reduce-scatter + all-gather
  // (models/training/reduce_scatter_all_gather_sync.hpp).
  const char* sync = layout.dp_sync == DpSync::kAllReduce ? "ring" : "reduce_scatter_all_gather";
  if (options.closed_form) {
    MLSIM_CHECK(options.links != nullptr, "a Megatron job in closed form needs the links");
    sync = layout.dp_sync == DpSync::kAllReduce ? "ring_closed_form"
                                                : "reduce_scatter_all_gather_closed_form";
    closed_form_ =
        std::make_unique<collectives::InterHostClosedForm>(*options.links, options.costs);
  }
  training::StageGradients::Setup setup{p.schedulers.get("fifo", "").value,
                                        training::SchedulerConfig{}, p.syncs.get(sync, "").value,
                                        training::SyncOptions{}};
  // Collapsed, a worker's gradients are its TP group's: TP copies of a GPU's share.
  setup.sync.bytes_per_parameter = layout.tp / static_cast<std::int64_t>(lanes_);
  setup.replica_groups = lanes_;
  // The graph's closed form prices one GPU's share (its collapsed collective's node bytes).
  if (closed_form_) setup.sync.bytes_per_parameter = 1;
  setup.sync.costs = options.costs;  // the graph pays them on every collective and message
  setup.sync.links = options.links;
  setup.stage_as_one_tensor = options.stage_as_one_tensor;
  stage_as_one_tensor_ = options.stage_as_one_tensor;
  // A DP group all on one host (several TP groups on a host): the closed form over its
  // intra_node link, one GPU's share, in both modes (the graph's GraphExecutor::launch).
  setup.make_one_host_sync =
      p.syncs
          .get(layout.dp_sync == DpSync::kAllReduce ? "ring_closed_form"
                                                    : "reduce_scatter_all_gather_closed_form",
               "")
          .value;
  setup.one_host_sync = setup.sync;
  setup.one_host_sync.bytes_per_parameter = 1;
  setup.one_host_sync.hardware = &compute.hardware();
  if (closed_form_) setup.sync.hardware = &compute.hardware();
  // Stage s's DP ring (of TP index t) is the graph's DP group of ranks t + lanes (d + dp s),
  // d < dp (the workers' numbering): the group's ECMP label; in the closed form its first
  // member's host link is split among that host's GPUs (the graph's first member's host_gpus).
  const auto lanes = static_cast<int>(lanes_);
  for (int s = 0; s < layout.pp; ++s)
    for (int t = 0; t < lanes; ++t) {
      std::vector<workload::RankId> members;
      bool one_host = true, distinct = true;
      std::vector<NodeId> seen;
      for (int d = 0; d < layout.dp; ++d) {
        const workload::RankId r = t + lanes * (d + layout.dp * s);
        const NodeId h = hosts_[static_cast<std::size_t>(r)];
        if (!seen.empty() && h != seen.front()) one_host = false;
        if (std::find(seen.begin(), seen.end(), h) != seen.end()) distinct = false;
        seen.push_back(h);
        members.push_back(r);
      }
      MLSIM_CHECK(closed_form_ || one_host || distinct,
                  "through the network a DP group is on one host or on distinct hosts (as on "
                  "the graph; checked at load)");
      setup.stage_flow_labels.push_back(workload::group_label(members));
      setup.stage_host_link_sharers.push_back(host_gpus_[static_cast<std::size_t>(members[0])]);
    }
  if (lanes_ > 1) {
    tensor_groups_.resize(hosts_.size() / lanes_);
    for (std::size_t g = 0; g < tensor_groups_.size(); ++g) {
      std::vector<workload::RankId> members;
      for (std::size_t t = 0; t < lanes_; ++t)
        members.push_back(static_cast<workload::RankId>(g * lanes_ + t));
      tensor_groups_[g].label = workload::group_label(members);
      if (closed_form_ || !pricer_->tensor_group_spans_hosts(g * lanes_)) continue;
      const std::span<const NodeId> group = pricer_->tensor_group_hosts(g * lanes_);
      for (std::size_t t = 1; t < group.size(); ++t)
        MLSIM_CHECK(std::find(group.begin(), group.begin() + static_cast<std::ptrdiff_t>(t),
                              group[t]) == group.begin() + static_cast<std::ptrdiff_t>(t),
                    "through the network a TP group is on one host or on distinct hosts (as "
                    "on the graph; checked at load)");
      MLSIM_CHECK(!options.merge_op_steps,
                  "merged op steps run a TP group's all-reduces as one step, which through the "
                  "network needs them inside one host (checked at load)");
    }
  }
  if (!on_failed) on_failed = [] {};
  on_failed_ = on_failed;
  messages_.set_failure_callback([f = on_failed] { f(); });
  gradients_ = std::make_unique<training::StageGradients>(engine, network, *job_, schedule_, setup,
                                                          std::move(on_failed));
  job_->set_schedule(&schedule_);
  job_->set_op_pricer(pricer_.get());
  job_->set_gradient_sink(gradients_.get());
  job_->set_op_observer(this);
  // Each worker's op order (the schedule's; Megatron's program), and which receives it pairs.
  progress_.resize(hosts_.size());
  meters_.resize(hosts_.size());
  for (Meter& m : meters_) m.report.exposed_s.assign(MegatronSource::phase_names().size(), 0.0);
  for (std::size_t w = 0; w < hosts_.size(); ++w) {
    Progress& p = progress_[w];
    const std::size_t m = schedule_.worker(w).micro_batches;
    p.forward_at.assign(m, 0);
    p.backward_at.assign(m, 0);
    const auto stage = static_cast<int>(schedule_.worker(w).stage);
    const auto warm_up =
        static_cast<std::size_t>(std::min(layout.pp - stage - 1, layout.micro_batches));
    const bool steady = m > warm_up;
    std::size_t f = 0, b = 0;
    bool previous_forward = true;
    while (const auto op = schedule_.next(w, f, b)) {
      (op->forward ? p.forward_at : p.backward_at)[op->micro_batch] = p.ops;
      p.paired.push_back(p.ops > 0 && steady && op->forward != previous_forward);
      previous_forward = op->forward;
      ++(op->forward ? f : b);
      ++p.ops;
    }
  }
}

MegatronCoreJob::~MegatronCoreJob() {
  for (TensorGroup& g : tensor_groups_) engine_.cancel(g.end);
}

void MegatronCoreJob::start_tensor_collective(std::size_t group) {
  TensorGroup& g = tensor_groups_[group];
  const std::span<const NodeId> hosts = pricer_->tensor_group_hosts(group * lanes_);
  // GraphExecutor::launch through the network: the operation's first algorithm (the ring), one
  // GPU's activation per member, no window, the collective costs, the group's label.
  collectives::CollectiveSpec spec;
  spec.operation = collectives::Operation::kAllReduce;
  spec.algorithm = collectives::algorithms_for(spec.operation).front();
  spec.bytes = layout_.activation;
  spec.window = 0;
  spec.costs = costs_;
  spec.flow_label = g.label;
  g.collective = std::make_unique<collectives::Collective>(
      engine_, network_, std::vector<NodeId>(hosts.begin(), hosts.end()), spec,
      [this, group](const collectives::CollectiveResult&) {
        // Not from inside the collective's own callback (it is released there); the graph too
        // ends the members' nodes at a zero-delay event after it (GraphExecutor::finish_active).
        tensor_groups_[group].end = engine_.schedule_in(Time::zero(), [this, group] {
          TensorGroup& done = tensor_groups_[group];
          tensor_bytes_ += done.collective->result().bytes_delivered.count;
          done.collective.reset();
          for (std::size_t t = 0; t < lanes_; ++t) job_->step_done(group * lanes_ + t);
        });
      },
      links_);
  g.collective->set_failure_callback(
      [this](const collectives::CollectiveResult&) { on_failed_(); });
  g.collective->start();
}

void MegatronCoreJob::start() {
  // A rank's time counts from its start, as GraphExecutor::start's (a cluster job starts late).
  for (Meter& m : meters_) m.last_compute_end = engine_.now();
  job_->start();
}

bool MegatronCoreJob::receive_posted(std::size_t to, const Message& m) const {
  const Progress& p = progress_[to];
  if (p.iteration != m.iteration) return p.iteration > m.iteration;
  const std::size_t j = (m.forward ? p.forward_at : p.backward_at)[m.micro_batch];
  if (j == 0) return true;
  return p.paired[j] ? p.computed >= j : p.ended >= j;
}

// Micro-batch m's activation or its gradient to the same DP index of the next or previous stage:
// activation x TP bytes (the graph's collapsed message; a GPU's own when not collapsed); an op
// that ends_after_send ends on arrival. Zero bytes arrive at once.
void MegatronCoreJob::deliver(std::size_t to, const Message& m) {
  const std::size_t w = m.from;
  const std::size_t k = m.micro_batch;
  const bool forward = m.forward, blocking = m.blocking;
  const std::size_t record = records_.size();
  if (record_) records_.push_back({w, to, k, forward, engine_.now(), Time::zero()});
  auto arrived = [this, w, to, k, forward, blocking, record] {
    if (record_) records_[record].arrival = engine_.now();
    job_->input_arrived(to, k, forward);
    if (blocking) {
      ended(w);
      job_->output_sent(w);
    }
  };
  const Bytes bytes{layout_.activation.count * layout_.tp / static_cast<std::int64_t>(lanes_)};
  if (bytes.count <= 0) {
    engine_.schedule_in(Time::zero(), arrived);
    return;
  }
  ++messages_sent_;
  if (hosts_[w] == hosts_[to]) {  // inside one host: its intra_node link, one GPU's activation
    engine_.schedule_in(intra_.time(collectives::Operation::kSendRecv, 2, layout_.activation,
                                    hardware_.host(hosts_[w])),
                        arrived);
    return;
  }
  if (closed_form_) {  // one GPU's activation over its share of the sender's host link
    const std::array<NodeId, 2> pair = {hosts_[w], hosts_[to]};
    engine_.schedule_in(closed_form_->time(collectives::Operation::kSendRecv, 2, layout_.activation,
                                           pair, host_gpus_[w]),
                        arrived);
    return;
  }
  // Labelled as the graph's k-th message from rank w to rank `to` (flow_labels.hpp).
  messages_.send(
      hosts_[w], hosts_[to], bytes, [arrived](const collectives::CollectiveResult&) { arrived(); },
      workload::message_label(static_cast<workload::RankId>(w), static_cast<workload::RankId>(to),
                              m.seq));
}

void MegatronCoreJob::ended(std::size_t w) {
  Progress& p = progress_[w];
  meters_[w].last_op_end = engine_.now();
  if (++p.ended == p.ops) {
    p.ended = p.computed = 0;
    ++p.iteration;
    // The graph's next node is the iteration's DP sync (none at DP 1: the last op's stays).
    if (layout_.dp > 1) meters_[w].phase = MegatronSource::kData;
  }
  flush(w);
}

void MegatronCoreJob::flush(std::size_t to) {
  auto& waiting = progress_[to].waiting;
  for (std::size_t i = 0; i < waiting.size();) {
    if (!receive_posted(to, waiting[i])) {
      ++i;
      continue;
    }
    const Message m = waiting[i];
    waiting.erase(waiting.begin() + static_cast<std::ptrdiff_t>(i));
    deliver(to, m);
  }
}

void MegatronCoreJob::kernel_ended(std::size_t w) {
  Meter& m = meters_[w];
  if (!m.in_kernel) return;
  const Time now = engine_.now();
  m.report.compute_s += (now - m.kernel_started).seconds();
  m.last_compute_end = now;
  m.in_kernel = false;
  m.phase = MegatronSource::kCompute;
}

void MegatronCoreJob::join_tensor_all_reduce(std::size_t w, Time duration) {
  const std::size_t group = w / lanes_;
  TensorGroup& g = tensor_groups_[group];
  // Each member waits at its all-reduce until it ends, so all arrivals are for the same one.
  if (++g.arrived < lanes_) return;
  g.arrived = 0;
  if (!closed_form_ && pricer_->tensor_group_spans_hosts(w)) {
    start_tensor_collective(group);
    return;
  }
  // GraphExecutor::finish_active ends the members' nodes in member order at one event.
  g.end = engine_.schedule_in(duration, [this, group] {
    for (std::size_t t = 0; t < lanes_; ++t) job_->step_done(group * lanes_ + t);
  });
}

// GraphExecutor::start_kernel's accounting: the gap since the last kernel goes to the phase of
// the node before this one. A TP all-reduce is that node for the kernel after it; a receive
// (Megatron's recv_forward / recv_backward, or the receive of a send-receive pair) for an op's
// first kernel when the op needs an input.
void MegatronCoreJob::step_started(std::size_t w, const training::ScheduledOp& op,
                                   std::size_t index, const training::OpStep& step) {
  if (step.rendezvous) join_tensor_all_reduce(w, step.duration);
  Meter& m = meters_[w];
  kernel_ended(w);
  if (index == 0 && op.needs_input) m.phase = MegatronSource::kPipeline;
  if (step.kind == training::OpStep::Kind::kCollective) {
    m.phase = MegatronSource::kTensor;
    if (pricer_->merges_steps() && index > 0) {
      // Merged: the all-reduces that separated the op's kernels on the graph are exposed TP
      // time there, as if run first; the gap after them is measured from their end.
      const Time between = step.duration - pricer_->trailing_collectives(w, op);
      if (between > Time::zero()) {
        m.report.exposed_s[MegatronSource::kTensor] += between.seconds();
        m.last_compute_end = engine_.now() + between;
      }
    }
    return;
  }
  const Time now = engine_.now();
  if (now > m.last_compute_end) m.report.exposed_s[m.phase] += (now - m.last_compute_end).seconds();
  m.kernel_started = now;
  m.in_kernel = true;
}

workload::ExecutorCounts MegatronCoreJob::counts() const {
  workload::ExecutorCounts c;
  c.kernels = kernels_;
  c.messages = messages_sent_;
  std::uint64_t dp = 0;
  if (layout_.dp > 1) {
    const std::uint64_t per_sync = layout_.dp_sync == DpSync::kAllReduce ? 1 : 2;
    for (std::size_t s = 0; s < schedule_.stages(); ++s)
      for (std::size_t g = 0; g < lanes_; ++g) {  // replica t + lanes d is in group t
        const std::size_t w = schedule_.first_worker(s) + g;
        const auto& wk = schedule_.worker(w);
        const std::size_t end = stage_as_one_tensor_ ? wk.first_layer + 1 : wk.end_layer;
        for (std::size_t l = wk.first_layer; l < end; ++l) dp += per_sync * job_->updates(w, l);
      }
  }
  c.collectives = tp_collectives_ + dp;
  c.network_collectives = closed_form_ ? 0 : c.messages + dp;
  return c;
}

std::vector<workload::RankReport> MegatronCoreJob::rank_reports() const {
  std::vector<workload::RankReport> out;
  for (std::size_t w = 0; w < meters_.size(); ++w) {
    const Meter& m = meters_[w];
    workload::RankReport r = m.report;
    r.done = progress_[w].iteration >= static_cast<std::size_t>(layout_.iterations);
    // GraphExecutor::complete: the rank ends with its last node, the DP sync (its parameters
    // back) or, at DP 1, its last op; the time since its last kernel goes to that node's phase.
    r.finished = std::max(m.last_op_end, job_->last_update(w));
    if (r.done && r.finished > m.last_compute_end)
      r.exposed_s[m.phase] += (r.finished - m.last_compute_end).seconds();
    out.push_back(std::move(r));
  }
  return out;
}

void MegatronCoreJob::op_done(std::size_t w, const training::ScheduledOp& op) {
  const auto& wk = schedule_.worker(w);
  Progress& p = progress_[w];
  const std::size_t iteration = p.iteration;
  ++p.computed;
  ++ops_;
  const MegatronOpPricer::StepCounts steps = pricer_->count_steps(w, op);
  kernels_ += steps.kernels;
  if (w % lanes_ == 0) tp_collectives_ += steps.all_reduces;  // a TP group's, once
  const bool sends = op.forward ? wk.stage + 1 < schedule_.stages() : wk.stage > 0;
  // The op's compute is over; the graph's next node is its send (or send-receive pair) if any.
  kernel_ended(w);
  if (sends) meters_[w].phase = MegatronSource::kPipeline;
  if (!op.ends_after_send) {
    ended(w);  // the op ends now (its send, if any, does not hold it)
  } else {
    flush(w);  // a paired receive is posted with the send
  }
  if (!sends) return;
  const std::size_t m = wk.replica + op.micro_batch * wk.replicas;
  const std::size_t to_stage = op.forward ? wk.stage + 1 : wk.stage - 1;
  const auto [dest, k] = schedule_.worker_of(to_stage, m);
  // w sends to `dest` once per micro-batch of each iteration, in micro-batch order (forwards
  // and backwards alike in 1F1B), as the graph's rank sends to its peer rank: this is the
  // k-th message of the pair, counted over the iterations (the graph's channel sequence).
  const std::uint64_t seq =
      iteration * static_cast<std::uint64_t>(layout_.micro_batches) + op.micro_batch;
  const Message message{w, iteration, k, op.forward, op.ends_after_send, seq};
  if (receive_posted(dest, message)) {
    deliver(dest, message);
  } else {
    ++waits_;
    progress_[dest].waiting.push_back(message);
  }
}

}  // namespace mlsim::llm_training
