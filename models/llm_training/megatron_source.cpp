#include "models/llm_training/megatron_source.hpp"

#include <algorithm>

#include "sim_core/base/error.hpp"

namespace mlsim::llm_training {

using workload::GroupId;
using workload::KernelId;
using workload::Node;
using workload::NodeIndex;
using workload::NodeKind;
using workload::RankId;

std::vector<MegatronSource::Step> MegatronSource::stage_program(int s, int stages, int m) {
  const bool first = s == 0, last = s == stages - 1;
  const int warmup = std::min(stages - s - 1, m);
  const int remaining = m - warmup;
  std::vector<Step> p;
  for (int i = 0; i < warmup; ++i) {
    if (!first) p.push_back(Step::kRecvForward);
    p.push_back(Step::kForward);
    if (!last) p.push_back(Step::kSendForward);
  }
  if (remaining > 0 && !first) p.push_back(Step::kRecvForward);
  for (int i = 0; i < remaining; ++i) {
    p.push_back(Step::kForward);
    if (!last) p.push_back(Step::kSendForwardRecvBackward);
    p.push_back(Step::kBackward);
    if (!first)
      p.push_back(i + 1 == remaining ? Step::kSendBackward : Step::kSendBackwardRecvForward);
  }
  for (int i = 0; i < warmup; ++i) {
    if (!last) p.push_back(Step::kRecvBackward);
    p.push_back(Step::kBackward);
    if (!first) p.push_back(Step::kSendBackward);
  }
  p.push_back(Step::kDataSync);
  return p;
}

const std::vector<std::string>& MegatronSource::phase_names() {
  static const std::vector<std::string> names = {"compute", "tp", "pp", "dp"};
  return names;
}

MegatronSource::MegatronSource(const ParallelLayout& layout, StageKernels k) : layout_(layout) {
  MLSIM_CHECK(layout_.tp >= 1 && layout_.pp >= 1 && layout_.dp >= 1 && layout_.micro_batches >= 1 &&
                  layout_.layers_per_stage >= 1 && layout_.iterations >= 1,
              "a Megatron layout needs positive degrees");
  kernels_ = {std::move(k.attention_forward),  std::move(k.mlp_forward),
              std::move(k.attention_backward), std::move(k.mlp_backward),
              std::move(k.embedding_forward),  std::move(k.embedding_backward),
              std::move(k.head_forward),       std::move(k.head_backward)};
  const int tp = layout_.tp, dp = layout_.dp, pp = layout_.pp;
  const RankId n = ranks();
  tp_group_.assign(static_cast<std::size_t>(n), -1);
  dp_group_.assign(static_cast<std::size_t>(n), -1);
  const bool collapsed = layout_.collapse_tensor_parallel;
  if (tp > 1) {
    if (collapsed) {
      for (RankId r = 0; r < n; ++r) {
        tp_group_[static_cast<std::size_t>(r)] = static_cast<GroupId>(groups_.size());
        groups_.push_back({{r}, tp});
      }
    } else {
      for (RankId base = 0; base < n; base += tp) {
        workload::Group g;
        for (int t = 0; t < tp; ++t) {
          g.members.push_back(base + t);
          tp_group_[static_cast<std::size_t>(base + t)] = static_cast<GroupId>(groups_.size());
        }
        groups_.push_back(std::move(g));
      }
    }
  }
  if (dp > 1) {
    const int lanes = collapsed ? 1 : tp;  // GPUs of one (d, s) that are separate ranks
    for (int s = 0; s < pp; ++s)
      for (int t = 0; t < lanes; ++t) {
        workload::Group g;
        for (int d = 0; d < dp; ++d) {
          const RankId r = t + lanes * (d + dp * s);
          g.members.push_back(r);
          dp_group_[static_cast<std::size_t>(r)] = static_cast<GroupId>(groups_.size());
        }
        groups_.push_back(std::move(g));
      }
  }
  for (int s = 0; s < pp; ++s) programs_.push_back(stage_program(s, pp, layout_.micro_batches));
  cursors_.resize(static_cast<std::size_t>(n));

  // Nodes per rank, for progress: what emit_step emits for each step.
  const auto has = [&](KernelId id) {
    return kernels_[static_cast<std::size_t>(id)].empty() ? 0 : 1;
  };
  const double all_reduces = tp > 1 ? 2 : 0;  // per layer and direction
  const double layer_forward = has(kAttnF) + has(kMlpF) + all_reduces;
  const double layer_backward = has(kAttnB) + has(kMlpB) + all_reduces;
  const double ranks_per_stage = static_cast<double>(n) / pp;
  for (int s = 0; s < pp; ++s) {
    double nodes = 0;
    for (Step step : programs_[static_cast<std::size_t>(s)]) {
      switch (step) {
        case Step::kForward:
          nodes += layout_.layers_per_stage * layer_forward + (s == 0 ? has(kEmbF) : 0) +
                   (s == pp - 1 ? has(kHeadF) : 0);
          break;
        case Step::kBackward:
          nodes += layout_.layers_per_stage *
                       (layer_backward + (layout_.recompute ? layer_forward : 0)) +
                   (s == 0 ? has(kEmbB) : 0) + (s == pp - 1 ? has(kHeadB) : 0);
          break;
        case Step::kSendForwardRecvBackward:
        case Step::kSendBackwardRecvForward:
          nodes += 2;
          break;
        case Step::kDataSync:
          nodes += dp > 1 ? (layout_.dp_sync == DpSync::kAllReduce ? 1 : 2) : 0;
          break;
        default:
          nodes += 1;
      }
    }
    expected_nodes_ += nodes * ranks_per_stage * layout_.iterations;
  }
}

RankId MegatronSource::ranks() const {
  const std::int64_t n = static_cast<std::int64_t>(layout_.pp) * layout_.dp *
                         (layout_.collapse_tensor_parallel ? 1 : layout_.tp);
  return static_cast<RankId>(n);
}

std::int64_t MegatronSource::first_gpu(RankId r) const {
  return layout_.collapse_tensor_parallel ? static_cast<std::int64_t>(r) * layout_.tp : r;
}

int MegatronSource::width(RankId) const {
  return layout_.collapse_tensor_parallel ? layout_.tp : 1;
}

int MegatronSource::stage_of(RankId r) const {
  const int per_stage = layout_.dp * (layout_.collapse_tensor_parallel ? 1 : layout_.tp);
  return r / per_stage;
}

RankId MegatronSource::peer(RankId r, int stage_delta) const {
  const int per_stage = layout_.dp * (layout_.collapse_tensor_parallel ? 1 : layout_.tp);
  return r + stage_delta * per_stage;
}

NodeIndex MegatronSource::push(RankId r, Node node, std::vector<Node>& out, bool chained) {
  Cursor& c = cursors_[static_cast<std::size_t>(r)];
  if (chained) node.deps = c.tails;
  out.push_back(std::move(node));
  const NodeIndex index = c.emitted++;
  if (chained) {
    c.tails.clear();
    c.tails.push_back(index);
  }
  return index;
}

void MegatronSource::compute(RankId r, KernelId k, std::vector<Node>& out) {
  if (kernels_[static_cast<std::size_t>(k)].empty()) return;
  Node n;
  n.kind = NodeKind::kCompute;
  n.phase = kCompute;
  n.target = k;
  push(r, std::move(n), out);
}

void MegatronSource::tensor_all_reduce(RankId r, std::vector<Node>& out) {
  if (layout_.tp <= 1) return;
  Node n;
  n.kind = NodeKind::kCollective;
  n.phase = kTensor;
  n.operation = collectives::Operation::kAllReduce;
  n.target = tp_group_[static_cast<std::size_t>(r)];
  n.bytes = layout_.activation;
  push(r, std::move(n), out);
}

void MegatronSource::layer_pass(RankId r, bool forward, bool recompute_first,
                                std::vector<Node>& out) {
  if (forward || recompute_first) {
    compute(r, kAttnF, out);
    tensor_all_reduce(r, out);
    compute(r, kMlpF, out);
    tensor_all_reduce(r, out);
  }
  if (!forward) {
    compute(r, kMlpB, out);
    tensor_all_reduce(r, out);
    compute(r, kAttnB, out);
    tensor_all_reduce(r, out);
  }
}

void MegatronSource::emit_step(RankId r, Step step, std::vector<Node>& out) {
  const int s = stage_of(r);
  const bool first = s == 0, last = s == layout_.pp - 1;
  auto message = [&](NodeKind kind, int delta) {
    Node n;
    n.kind = kind;
    n.phase = kPipeline;
    n.target = peer(r, delta);
    n.bytes = layout_.activation;
    return n;
  };
  // A send and a receive posted together: both wait for what came before, the next step for both.
  auto pair = [&](Node a, Node b) {
    Cursor& c = cursors_[static_cast<std::size_t>(r)];
    a.deps = c.tails;
    b.deps = c.tails;
    const NodeIndex ia = push(r, std::move(a), out, false);
    const NodeIndex ib = push(r, std::move(b), out, false);
    c.tails.clear();
    c.tails.push_back(ia);
    c.tails.push_back(ib);
  };
  switch (step) {
    case Step::kRecvForward:
      push(r, message(NodeKind::kRecv, -1), out);
      break;
    case Step::kSendForward:
      push(r, message(NodeKind::kSend, +1), out);
      break;
    case Step::kRecvBackward:
      push(r, message(NodeKind::kRecv, +1), out);
      break;
    case Step::kSendBackward:
      push(r, message(NodeKind::kSend, -1), out);
      break;
    case Step::kSendForwardRecvBackward:
      pair(message(NodeKind::kSend, +1), message(NodeKind::kRecv, +1));
      break;
    case Step::kSendBackwardRecvForward:
      pair(message(NodeKind::kSend, -1), message(NodeKind::kRecv, -1));
      break;
    case Step::kForward:
      if (first) compute(r, kEmbF, out);
      for (int l = 0; l < layout_.layers_per_stage; ++l) layer_pass(r, true, false, out);
      if (last) compute(r, kHeadF, out);
      break;
    case Step::kBackward:
      if (last) compute(r, kHeadB, out);
      for (int l = 0; l < layout_.layers_per_stage; ++l)
        layer_pass(r, false, layout_.recompute, out);
      if (first) compute(r, kEmbB, out);
      break;
    case Step::kDataSync: {
      if (layout_.dp <= 1) break;
      Node n;
      n.kind = NodeKind::kCollective;
      n.phase = kData;
      n.target = dp_group_[static_cast<std::size_t>(r)];
      n.bytes = first  ? layout_.first_stage_grads
                : last ? layout_.last_stage_grads
                       : layout_.middle_stage_grads;
      if (layout_.pp == 1) n.bytes = layout_.first_stage_grads;
      if (layout_.dp_sync == DpSync::kAllReduce) {
        n.operation = collectives::Operation::kAllReduce;
        push(r, n, out);
      } else {
        n.operation = collectives::Operation::kReduceScatter;
        push(r, n, out);
        n.operation = collectives::Operation::kAllGather;
        push(r, n, out);
      }
      break;
    }
  }
}

bool MegatronSource::next(RankId r, std::vector<Node>& out) {
  Cursor& c = cursors_[static_cast<std::size_t>(r)];
  const auto& program = programs_[static_cast<std::size_t>(stage_of(r))];
  const std::size_t before = out.size();
  while (out.size() == before) {
    if (c.step == program.size()) {
      c.step = 0;
      ++c.iteration;
    }
    if (c.iteration >= layout_.iterations) return false;
    emit_step(r, program[c.step++], out);
  }
  return true;
}

}  // namespace mlsim::llm_training
