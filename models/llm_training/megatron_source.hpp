#pragma once
// One Megatron-LM training iteration as an execution graph (sim_core/workload): tensor parallel
// (TP) x pipeline parallel (PP) x data parallel (DP) ranks, emitted a step at a time.
//
//  - Ranks: GPU g = t + TP x (d + DP x s) for TP index t, DP index d, stage s (Megatron's
//    default order, tensor innermost, so a TP group fills consecutive GPUs of one host).
//  - Tensor parallel (Shoeybi et al. 2019, Megatron-LM, section 3): per layer two all-reduces
//    forward (after the attention output projection and after the MLP down projection) and two
//    backward (the input gradients of the column-parallel QKV and MLP up projections), each of
//    micro-batch x sequence x hidden x 2 bytes, over the TP group.
//  - Pipeline parallel: Megatron's non-interleaved 1F1B schedule
//    (megatron/core/pipeline_parallel/schedules.py, forward_backward_pipelining_without_
//    interleaving): stage s runs min(PP - s - 1, M) warm-up forwards, then alternates one
//    forward and one backward, then the remaining backwards; activations go forward and their
//    gradients back as point-to-point messages of micro-batch x sequence x hidden x 2 bytes, the
//    paired send/receive calls (send_forward_recv_backward, ...) blocking the stage until both
//    are done, as Megatron's batched isend/irecv followed by a wait.
//  - Data parallel: after the last backward, each rank's gradients (its share of the stage's
//    parameters, 2 bytes each) are all-reduced over its DP group, or reduce-scattered and the
//    updated parameters all-gathered (a distributed optimizer); nothing overlaps it.
//  - Activation recomputation (Megatron's full recomputation, which the GPT-3 runs of Narayanan
//    et al. SC'21 used): each layer's forward runs again just before its backward.
//
// Symmetry (collapse_tensor_parallel): the TP ranks of a group run the same kernels in
// lock-step; collapsed, one graph rank of width TP stands for all of them, its TP all-reduces run
// inside it (a group of one member with TP GPUs) and its messages and DP collectives count TP
// copies of their bytes (GraphSource::width). Off, every GPU is its own rank.
#include <cstdint>
#include <string>
#include <vector>

#include "sim_core/workload/execution_graph.hpp"

namespace mlsim::llm_training {

enum class DpSync { kAllReduce, kReduceScatterAllGather };

struct ParallelLayout {
  int tp = 1, pp = 1, dp = 1;
  int micro_batches = 1;  // M per pipeline per iteration
  int layers_per_stage = 1;
  Bytes activation;         // one micro-batch's activations: mb x seq x hidden x 2
  Bytes first_stage_grads;  // gradient bytes of one GPU of the first / middle / last stage
  Bytes middle_stage_grads;
  Bytes last_stage_grads;
  DpSync dp_sync = DpSync::kAllReduce;
  bool recompute = false;
  bool collapse_tensor_parallel = true;
  int iterations = 1;
};

// The kernels of one layer and of the first and last stage's extra work. A stage runs, per
// micro-batch and layer, attention then MLP forward (each followed by a TP all-reduce), and
// backward in reverse; the first stage also embeds, the last computes the head and loss.
struct StageKernels {
  std::vector<Work> attention_forward, mlp_forward, attention_backward, mlp_backward;
  std::vector<Work> embedding_forward, embedding_backward, head_forward, head_backward;
};

class MegatronSource final : public workload::GraphSource {
 public:
  // The kernels of a stage, numbered as the graph's compute nodes and MegatronOpPricer name them.
  static constexpr workload::KernelId kAttnF = 0, kMlpF = 1, kAttnB = 2, kMlpB = 3, kEmbF = 4,
                                      kEmbB = 5, kHeadF = 6, kHeadB = 7;

  // Phase indices nodes are charged to.
  static constexpr std::uint8_t kCompute = 0, kTensor = 1, kPipeline = 2, kData = 3;
  // Their names, in that order (the metrics' exposed_<name>_s; the training core's too).
  static const std::vector<std::string>& phase_names();

  MegatronSource(const ParallelLayout& layout, StageKernels kernels);

  workload::RankId ranks() const override;
  std::int64_t first_gpu(workload::RankId r) const override;
  int width(workload::RankId r) const override;
  const std::vector<workload::Group>& groups() const override { return groups_; }
  const std::vector<std::vector<Work>>& kernels() const override { return kernels_; }
  const std::vector<std::string>& phases() const override { return phases_; }
  bool next(workload::RankId r, std::vector<workload::Node>& out) override;
  double expected_nodes() const override { return expected_nodes_; }

  int stage_of(workload::RankId r) const;
  // The steps of a stage's program in one iteration, as Megatron issues them (for tests).
  enum class Step : std::uint8_t {
    kRecvForward,
    kForward,
    kSendForward,
    kSendForwardRecvBackward,
    kBackward,
    kSendBackward,
    kSendBackwardRecvForward,
    kRecvBackward,
    kDataSync
  };
  static std::vector<Step> stage_program(int stage, int stages, int micro_batches);

 private:
  struct Cursor {
    int iteration = 0;
    std::size_t step = 0;
    workload::NodeIndex emitted = 0;
    SmallVector<workload::NodeIndex, 2> tails;  // what the next step waits for
  };
  void emit_step(workload::RankId r, Step step, std::vector<workload::Node>& out);
  workload::NodeIndex push(workload::RankId r, workload::Node node,
                           std::vector<workload::Node>& out, bool chained = true);
  void layer_pass(workload::RankId r, bool forward, bool recompute_first,
                  std::vector<workload::Node>& out);
  void compute(workload::RankId r, workload::KernelId k, std::vector<workload::Node>& out);
  void tensor_all_reduce(workload::RankId r, std::vector<workload::Node>& out);
  workload::RankId peer(workload::RankId r, int stage_delta) const;

  ParallelLayout layout_;
  std::vector<std::vector<Work>> kernels_;
  std::vector<workload::Group> groups_;
  std::vector<std::string> phases_ = phase_names();
  std::vector<std::vector<Step>> programs_;  // per stage
  std::vector<Cursor> cursors_;
  std::vector<workload::GroupId> tp_group_, dp_group_;  // per rank
  double expected_nodes_ = 0;
};

}  // namespace mlsim::llm_training
