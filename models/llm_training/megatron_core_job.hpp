#pragma once
// A Megatron-LM TP x PP x DP training job on the training core (plan steps 1 and 5 in
// docs/training.md), the core's counterpart of megatron_source.hpp's execution graph:
//
//  - Workers: one per (stage s, DP index d), worker r = d + DP x s (the graph's rank order,
//    tensor innermost), each standing for its TP group of `tp` GPUs on the host it is given
//    (`hosts[r]`, the graph's collapsed rank's host: hosts_of()). With the layout's
//    collapse_tensor_parallel off, one per GPU, worker g = t + TP x (d + DP x s) as the graph's
//    uncollapsed rank g: its TP all-reduces are rendezvous steps (OpStep::rendezvous) that end
//    for the whole TP group together, the closed form's time after its last member arrived (as
//    GraphExecutor::arrive starts a group's collective); its messages carry one activation and
//    its stage's DP group is that of its TP index t (StageGradients' replica groups), as the
//    graph's.
//  - Order: PipelineSchedule 1F1B with one replica per stage per DP index and Megatron's two
//    flags (gradients handed over with the last backward, blocking sends).
//  - Ops priced by MegatronOpPricer (kernels through the platform's Compute, TP all-reduces in
//    closed form over the host's intra-node link).
//  - DP: StageGradients, one gradient path per stage over its DP copies, the training core's
//    `ring` strategy with the collective layer's costs; a stage's layers share its gradient
//    bytes (its GPU's share of the stage's parameters x TP copies, as the graph's collapsed
//    rank counts them).
//  - Activations and their gradients: a point-to-point message of activation x TP bytes (the
//    graph's collapsed message; one activation when not collapsed) from a worker to the same DP
//    (and TP) index of the next or previous stage; an op that ends_after_send ends on delivery.
//  - ECMP labels (sim_core/workload/flow_labels.hpp): the k-th message from worker a to worker b
//    is labelled as the graph labels the k-th message from its rank a to rank b, and each
//    stage's DP ring as the graph's DP group of those ranks, so on a fabric with several equal
//    paths (the shipped leaf-spines) every byte takes the graph's path.
//  - Closed form (MegatronCoreOptions::closed_form): a message takes InterHostClosedForm's time
//    for one GPU's activation between the two hosts, and each stage's DP sync is the core's
//    ring_closed_form (or reduce_scatter_all_gather_closed_form) over one GPU's share of the
//    gradients, each with the host's link split among its GPUs: the graph's closed form of its
//    collapsed message and DP collective (GraphExecutor::launch), through the same function.
//  - Hosts shared by several TP groups (TP below the host's GPUs; hosts[r] repeats): a message
//    between two workers on one host, and a stage's DP group all on one host, are priced in
//    closed form over the host's intra_node link (intra_host.hpp, as the graph prices ranks on
//    one host), in both modes; a DP group with several members on a host and others elsewhere
//    takes the inter-host closed form (closed form only: through the network the graph refuses
//    it too). Not collapsed, a TP group on several hosts (TP above the hosts' GPUs) runs its
//    all-reduces in the inter-host closed form or, through the network, as a ring among the
//    members' hosts (labelled as the graph's group) started when the last member arrived.
//  - Rendezvous (as the graph's GraphExecutor::match, Megatron's batched isend/irecv): a message
//    starts once the sender's op computed it and the receiver posted its receive. Stage s runs
//    W = min(PP - s - 1, M) warm-up forwards, then R = M - W steady pairs, then the cool-down
//    backwards (megatron_source.hpp). The receive for an op is posted together with the
//    receiver's previous op's send when Megatron pairs them (a steady backward's gradient with
//    send_forward_recv_backward, a steady forward after the first with
//    send_backward_recv_forward: the previous op's compute end), otherwise once the previous op
//    ended (its blocking send delivered), and at once for a worker's first op of an iteration.
//
//  - Exposure (rank_reports()): each worker's time as the graph's GraphExecutor reports a rank's
//    (RankReport): its kernels' time, and each gap between kernels charged to the phase of the
//    graph node just before the kernel that ended it (MegatronSource's phases: a TP all-reduce
//    "tp"; a message, or a receive posted before the op, "pp"; the DP sync "dp"), the gap after
//    its last kernel to the phase of its last node (its DP sync, else its last op's). With
//    merged op steps, the part of an op's all-reduce step that ran between its kernels on the
//    graph is charged to TP at once and the rest measured as a gap, as on the graph up to
//    the merged steps' nanosecond rounding.
//
// Equal to the graph in network mode and in closed form, to the nanosecond, on the cross-checks'
// configurations (tests/llm_training/core_cross_check_test.cpp, core_closed_form_test.cpp); where
// the two could still differ is listed in docs/training.md ("Where the two cores could differ").
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "models/llm_training/megatron_op_pricer.hpp"
#include "models/llm_training/megatron_source.hpp"
#include "models/training/data_parallel_job.hpp"
#include "models/training/pipeline_schedule.hpp"
#include "models/training/stage_gradients.hpp"
#include "sim_core/collectives/collective.hpp"
#include "sim_core/collectives/inter_host.hpp"
#include "sim_core/collectives/intra_host.hpp"
#include "sim_core/collectives/point_to_point.hpp"
#include "sim_core/network/link_conditions.hpp"
#include "sim_core/workload/graph_executor.hpp"

namespace mlsim::llm_training {

struct MegatronCoreOptions {
  collectives::CostModel costs;  // the collective layer's: launch, per-step latency, protocols
  // Must outlive the job when given (protocols chosen from the routes, as the graph's).
  const LinkConditions* links = nullptr;
  // Each stage's layers as one DP tensor: one all-reduce of the whole stage's gradients per
  // stage, as the graph runs it (otherwise one per layer, each of the layer's share).
  bool stage_as_one_tensor = true;
  // Each op's kernels as one compute step and its TP all-reduces as one step (MegatronOpPricer's
  // merge_steps): fewer events, the same times up to nanosecond rounding.
  bool merge_op_steps = false;
  // Messages and DP collectives in closed form, with no traffic (the graph's
  // CommunicationMode::kClosedForm, sim_core/collectives/inter_host.hpp): needs `links`.
  bool closed_form = false;
};

class MegatronCoreJob final : public training::OpObserver {
 public:
  // `hosts`: per worker (pp x dp of them, or pp x dp x tp with TP not collapsed; rank order),
  // its host (the graph's rank's: several workers may share one; not collapsed, a TP group's
  // may span hosts). Through the network, a stage's DP group (and a TP group) must be on one
  // host or on distinct hosts, as on the graph (an internal check). `engine`,
  // `network` and `compute` must outlive the job; `on_failed` runs once, at the first transfer
  // that found no route.
  MegatronCoreJob(Engine& engine, Network& network, Compute& compute, const ParallelLayout& layout,
                  StageKernels kernels, std::vector<NodeId> hosts, MegatronCoreOptions options,
                  std::function<void()> on_failed = {});
  ~MegatronCoreJob() override;
  MegatronCoreJob(const MegatronCoreJob&) = delete;
  MegatronCoreJob& operator=(const MegatronCoreJob&) = delete;

  void start();
  // Runs once, when the job finishes, from inside the core's call (defer anything that
  // destroys the job): DataParallelJob::set_on_finished.
  void set_on_finished(std::function<void()> f) { job_->set_on_finished(std::move(f)); }
  bool finished() const { return job_->finished(); }
  Time finish_time() const { return job_->finish_time(); }
  double progress() const { return job_->progress(); }
  const training::DataParallelJob& core() const { return *job_; }
  const training::PipelineSchedule& schedule() const { return schedule_; }
  const training::StageGradients& gradients() const { return *gradients_; }
  std::uint64_t messages() const { return messages_sent_; }
  // Bytes of its activation and activation-gradient messages the network delivered.
  std::int64_t message_bytes_delivered() const { return messages_.bytes_delivered(); }
  // What GraphExecutor::counts() counts for the same run, counted on the core (equal to the
  // graph's once both finished: LlmTrainingScenario.TheTrainingCoreGivesTheGraphsIteration*,
  // LlmTrainingClosedForm.TheTrainingCoreGivesTheGraphsClosedForm):
  // kernels run (each op's kernels as MegatronOpPricer gives them unmerged), collectives (a TP
  // group's all-reduces, once per group, and each stage DP group's collectives of the syncs
  // completed: one per sync, two for the distributed optimizer, per layer when a stage is not one
  // tensor), messages, and network_collectives (the messages and DP collectives through the
  // network; none in the closed form). `nodes` stays 0: the core runs no graph (ops() instead).
  workload::ExecutorCounts counts() const;
  // Ops computed over every worker (forwards and backwards, each of its micro-batch).
  std::uint64_t ops() const { return ops_; }
  // Bytes of TP all-reduces the network delivered (TP groups over several hosts).
  std::int64_t tensor_bytes_delivered() const { return tensor_bytes_; }
  // Messages that waited for their receive to be posted.
  std::uint64_t rendezvous_waits() const { return waits_; }
  // For tests: every message's start and arrival, once turned on (before start()).
  struct MessageRecord {
    std::size_t from = 0, to = 0, micro_batch = 0;  // the receiver's micro-batch
    bool forward = true;
    Time start, arrival;
  };
  void record_messages(bool on) { record_ = on; }
  const std::vector<MessageRecord>& message_records() const { return records_; }

  // Per worker (rank order), as GraphExecutor::reports() gives the graph's collapsed ranks:
  // compute_s, exposed_s per MegatronSource phase (compute, tp, pp, dp) and when the worker
  // finished (its last op ended and its last parameters came back). Complete once finished().
  std::vector<workload::RankReport> rank_reports() const;

  void op_done(std::size_t worker, const training::ScheduledOp& op) override;
  void step_started(std::size_t worker, const training::ScheduledOp& op, std::size_t index,
                    const training::OpStep& step) override;

 private:
  // A message computed by its sender, waiting for its receiver to post the receive.
  struct Message {
    std::size_t from, iteration, micro_batch;  // the receiver's micro-batch (its numbering)
    bool forward;                              // an activation (else a gradient)
    bool blocking;                             // the sender's op ends on delivery
    std::uint64_t seq;  // the k-th message from `from` to its receiver (its ECMP label's k)
  };
  // Per worker: its ops in one iteration, where each op needing an input sits in that order,
  // and how far it is (ops computed, ops ended) in which iteration.
  struct Progress {
    std::vector<std::size_t> forward_at, backward_at;  // per micro-batch: op index
    std::vector<bool> paired;                          // per op index
    std::size_t ops = 0, computed = 0, ended = 0, iteration = 0;
    std::vector<Message> waiting;  // messages to this worker, receive not posted yet
  };
  // Per worker, the graph's accounting of a rank's time (GraphExecutor::start_kernel,
  // kernel_done, complete): `phase`, the phase of the graph node the next kernel would follow.
  struct Meter {
    workload::RankReport report;
    Time last_compute_end, kernel_started, last_op_end;
    bool in_kernel = false;
    std::uint8_t phase = MegatronSource::kCompute;
  };
  // Worker w's TP group's all-reduce among hosts through the network (not collapsed, the group
  // on several hosts): a ring labelled as the graph's group, its members' steps ended together.
  void start_tensor_collective(std::size_t group);
  void kernel_ended(std::size_t w);
  // Worker w reached its TP group's next all-reduce (TP not collapsed); the last member to
  // arrive starts it, and it ends for every member `duration` later.
  void join_tensor_all_reduce(std::size_t w, Time duration);
  bool receive_posted(std::size_t to, const Message& m) const;
  void deliver(std::size_t to, const Message& m);
  void ended(std::size_t w);   // w's op in progress ended
  void flush(std::size_t to);  // starts the messages whose receive is now posted

  Engine& engine_;
  Network& network_;
  const NodeHardware& hardware_;
  collectives::CostModel costs_;
  const LinkConditions* links_;
  ParallelLayout layout_;
  std::vector<NodeId> hosts_;
  training::PipelineSchedule schedule_;
  collectives::PointToPoint messages_;
  std::unique_ptr<training::DataParallelJob> job_;
  std::unique_ptr<MegatronOpPricer> pricer_;
  std::unique_ptr<training::StageGradients> gradients_;
  // Closed form only: messages' times. Each worker's host's GPUs (its link's sharers).
  std::unique_ptr<collectives::InterHostClosedForm> closed_form_;
  std::vector<int> host_gpus_;
  collectives::IntraHostPriceCache intra_;  // messages inside a host
  std::function<void()> on_failed_;
  std::uint64_t messages_sent_ = 0, waits_ = 0;
  std::uint64_t ops_ = 0, kernels_ = 0, tp_collectives_ = 0;  // counts()
  bool stage_as_one_tensor_ = true;
  std::int64_t tensor_bytes_ = 0;
  bool record_ = false;
  std::vector<MessageRecord> records_;
  std::vector<Progress> progress_;
  std::vector<Meter> meters_;
  // Per TP group (TP not collapsed): members at its current all-reduce, and its end event.
  struct TensorGroup {
    std::size_t arrived = 0;
    EventHandle end;
    std::unique_ptr<collectives::Collective> collective;  // through the network, on several hosts
    std::uint64_t label = 0;                              // its ECMP label (the graph's group's)
  };
  std::size_t lanes_ = 1;  // workers per TP group: 1 collapsed, else tp
  std::vector<TensorGroup> tensor_groups_;
};

}  // namespace mlsim::llm_training
