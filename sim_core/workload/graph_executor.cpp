#include "sim_core/workload/graph_executor.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <array>

#include "sim_core/base/error.hpp"
#include "sim_core/collectives/intra_host.hpp"
#include "sim_core/workload/flow_labels.hpp"

namespace mlsim::workload {

namespace {
std::string_view kind_name(NodeKind k) {
  switch (k) {
    case NodeKind::kCompute:
      return "compute";
    case NodeKind::kCollective:
      return "collective";
    case NodeKind::kSend:
      return "send";
    case NodeKind::kRecv:
      return "recv";
  }
  return "?";
}
}  // namespace

GraphExecutor::GraphExecutor(Engine& engine, Network& network, Compute& compute,
                             const LinkConditions& links, GraphSource& source,
                             ExecutorOptions options, const std::string& where)
    : engine_(engine),
      network_(network),
      compute_(compute),
      links_(links),
      source_(source),
      options_(std::move(options)) {
  if (options_.low_water == 0) options_.low_water = 1;
  // GPU g lives on the host whose range of GPUs holds it (hosts in topology order, or the
  // hosts the options place the graph on, in their order).
  const bool placed = !options_.hosts.empty();
  std::vector<NodeId> hosts;
  std::vector<std::int64_t> host_first_gpu;
  std::int64_t gpus = 0;
  if (placed) {
    for (const HostGpus& h : options_.hosts) {
      if (h.gpus < 1 || compute_.hardware().host(h.host) == nullptr)
        throw InputError(where, fmt::format("placed on node {} with {} GPUs: expected a host with "
                                            "GPUs (topology.hardware) and at least one of them",
                                            h.host, h.gpus));
      hosts.push_back(h.host);
      host_first_gpu.push_back(gpus);
      gpus += h.gpus;
    }
  } else {
    hosts = links_.topology().hosts();
    for (NodeId h : hosts) {
      host_first_gpu.push_back(gpus);
      const HostHardware* hw = compute_.hardware().host(h);
      gpus += hw != nullptr ? hw->gpus : 1;
    }
  }
  const RankId n = source_.ranks();
  ranks_.resize(static_cast<std::size_t>(n));
  reports_.resize(static_cast<std::size_t>(n));
  for (RankId r = 0; r < n; ++r) {
    Rank& rank = ranks_[static_cast<std::size_t>(r)];
    const std::int64_t first = source_.first_gpu(r);
    rank.width = source_.width(r);
    if (first < 0 || rank.width < 1 || first + rank.width > gpus)
      throw InputError(
          where, fmt::format("rank {} needs GPUs {}..{}, but {} hold {} GPUs{}", r, first,
                             first + rank.width - 1,
                             placed ? "the hosts it was placed on" : "the topology's hosts", gpus,
                             placed ? "" : " (topology.hardware.gpus_per_host)"));
    const auto it = std::upper_bound(host_first_gpu.begin(), host_first_gpu.end(), first) - 1;
    const auto h = static_cast<std::size_t>(it - host_first_gpu.begin());
    const std::int64_t host_end = h + 1 < host_first_gpu.size() ? host_first_gpu[h + 1] : gpus;
    if (first + rank.width > host_end)
      throw InputError(where, fmt::format("rank {} stands for {} GPUs from GPU {}, which are not "
                                          "all on one host",
                                          r, rank.width, first));
    rank.host = hosts[h];
    rank.host_gpus = static_cast<int>(host_end - host_first_gpu[h]);
    const HostHardware* hw = compute_.hardware().host(rank.host);
    const GpuSpec* gpu = hw != nullptr ? hw->gpu : nullptr;
    auto c = std::find(gpu_classes_.begin(), gpu_classes_.end(), gpu);
    if (c == gpu_classes_.end()) c = gpu_classes_.insert(gpu_classes_.end(), gpu);
    rank.gpu_class = static_cast<std::size_t>(c - gpu_classes_.begin());
    reports_[static_cast<std::size_t>(r)].exposed_s.assign(source_.phases().size(), 0.0);
  }
  kernel_price_.assign(source_.kernels().size() * gpu_classes_.size(), -1.0);

  const auto& groups = source_.groups();
  groups_.resize(groups.size());
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const Group& group = groups[g];
    GroupState& state = groups_[g];
    if (group.members.empty() || group.gpus_per_member < 1)
      throw InputError(where, fmt::format("group {} has no members", g));
    state.next_seq.assign(group.members.size(), 0);
    for (std::size_t m = 0; m < group.members.size(); ++m) {
      const RankId r = group.members[m];
      if (r < 0 || r >= n) throw InputError(where, fmt::format("group {} names rank {}", g, r));
      Rank& rank = ranks_[static_cast<std::size_t>(r)];
      if (rank.width % group.gpus_per_member != 0)
        throw InputError(where, fmt::format("group {}: rank {} of width {} cannot contribute {} "
                                            "GPUs per copy",
                                            g, r, rank.width, group.gpus_per_member));
      rank.positions.emplace_back(static_cast<GroupId>(g), static_cast<int>(m));
      if (!state.hosts.empty() && state.hosts.front() != rank.host) state.one_host = false;
      if (std::find(state.hosts.begin(), state.hosts.end(), rank.host) != state.hosts.end())
        state.distinct_hosts = false;
      state.hosts.push_back(rank.host);
    }
    if (group.gpus_per_member > 1 && group.members.size() > 1) state.distinct_hosts = false;
    state.label = group_label(group.members);
    if (options_.mode == CommunicationMode::kNetwork && !state.one_host && !state.distinct_hosts)
      throw InputError(where, fmt::format("group {} has several GPUs on one host and others on "
                                          "other hosts: the network carries bytes between hosts, "
                                          "not between the GPUs of a host; use the closed-form "
                                          "mode or a layout whose groups are inside one host or "
                                          "on distinct hosts",
                                          g));
  }
}

// Nothing of the graph may run after it: its kernels and scheduled ends are cancelled, and its
// collectives' transfers with them (Collective's destructor).
GraphExecutor::~GraphExecutor() {
  for (Rank& rank : ranks_)
    if (rank.kernel.valid()) compute_.cancel(rank.kernel);
  for (Active& a : active_)
    if (a.event.valid()) engine_.cancel(a.event);
}

GraphExecutor::NodeState& GraphExecutor::at(RankId r, NodeIndex i) {
  Rank& rank = ranks_[static_cast<std::size_t>(r)];
  return rank.window[static_cast<std::size_t>(i - rank.base)];
}

void GraphExecutor::start() {
  last_progress_ = engine_.now();
  for (RankId r = 0; r < static_cast<RankId>(ranks_.size()); ++r) {
    Rank& rank = ranks_[static_cast<std::size_t>(r)];
    rank.last_compute_end = engine_.now();
    pull(r);
    if (rank.source_done && rank.unfinished == 0 && !reports_[static_cast<std::size_t>(r)].done) {
      reports_[static_cast<std::size_t>(r)].done = true;
      reports_[static_cast<std::size_t>(r)].finished = engine_.now();
      ++finished_ranks_;
    }
  }
  if (done() && on_done_) on_done_();
}

double GraphExecutor::progress() const {
  const double expected = source_.expected_nodes();
  if (expected <= 0) return -1;
  return std::min(1.0, static_cast<double>(counts_.nodes) / expected);
}

void GraphExecutor::pull(RankId r) {
  Rank& rank = ranks_[static_cast<std::size_t>(r)];
  while (!rank.source_done && rank.unfinished < options_.low_water) {
    buffer_.clear();
    if (!source_.next(r, buffer_)) {
      rank.source_done = true;
      break;
    }
    // admit() may start work that completes later, never now: the buffer stays ours.
    std::vector<Node> batch;
    batch.swap(buffer_);
    for (Node& node : batch) admit(r, std::move(node));
    batch.swap(buffer_);
  }
}

void GraphExecutor::admit(RankId r, Node node) {
  Rank& rank = ranks_[static_cast<std::size_t>(r)];
  const NodeIndex index = rank.base + rank.window.size();
  NodeState& state = rank.window.emplace_back();
  state.ready_phase = rank.last_phase;
  for (NodeIndex d : node.deps) {
    MLSIM_CHECK(d < index, "a node depends on a later node of its rank");
    if (d < rank.base) continue;
    NodeState& dep = at(r, d);
    if (dep.done) continue;
    dep.dependents.push_back(index);
    ++state.waiting;
  }
  switch (node.kind) {
    case NodeKind::kCompute:
      MLSIM_CHECK(
          node.target >= 0 && static_cast<std::size_t>(node.target) < source_.kernels().size(),
          "a compute node names an unknown kernel");
      break;
    case NodeKind::kCollective: {
      MLSIM_CHECK(node.target >= 0 && static_cast<std::size_t>(node.target) < groups_.size(),
                  "a collective names an unknown group");
      const auto pos = std::find_if(rank.positions.begin(), rank.positions.end(),
                                    [&](const auto& p) { return p.first == node.target; });
      MLSIM_CHECK(pos != rank.positions.end(), "a rank joins a collective of a group it is not in");
      state.seq = groups_[static_cast<std::size_t>(node.target)]
                      .next_seq[static_cast<std::size_t>(pos->second)]++;
      break;
    }
    case NodeKind::kSend:
    case NodeKind::kRecv: {
      MLSIM_CHECK(
          node.target >= 0 && node.target < static_cast<RankId>(ranks_.size()) && node.target != r,
          "a message names an unknown peer or its own rank");
      const bool send = node.kind == NodeKind::kSend;
      const RankId from = send ? r : node.target, to = send ? node.target : r;
      Channel& ch =
          channels_[(static_cast<std::uint64_t>(from) << 32) | static_cast<std::uint32_t>(to)];
      state.seq = send ? ch.next_send++ : ch.next_recv++;
      break;
    }
  }
  state.node = std::move(node);
  ++rank.unfinished;
  if (state.waiting == 0) ready(r, index);
}

void GraphExecutor::ready(RankId r, NodeIndex i) {
  Rank& rank = ranks_[static_cast<std::size_t>(r)];
  switch (at(r, i).node.kind) {
    case NodeKind::kCompute:
      if (rank.computing)
        rank.compute_queue.push_back(i);
      else
        start_kernel(r, i);
      break;
    case NodeKind::kCollective:
      arrive(r, i);
      break;
    case NodeKind::kSend:
    case NodeKind::kRecv:
      match(r, i);
      break;
  }
}

double GraphExecutor::kernel_seconds(const Rank& rank, KernelId k) {
  double& price = kernel_price_[static_cast<std::size_t>(k) * gpu_classes_.size() + rank.gpu_class];
  if (price < 0) {
    price = 0;
    for (const Work& w : source_.kernels()[static_cast<std::size_t>(k)])
      price += compute_.nominal_seconds(rank.host, w);
  }
  return price;
}

void GraphExecutor::start_kernel(RankId r, NodeIndex i) {
  Rank& rank = ranks_[static_cast<std::size_t>(r)];
  NodeState& state = at(r, i);
  RankReport& report = reports_[static_cast<std::size_t>(r)];
  const Time now = engine_.now();
  if (now > rank.last_compute_end)
    report.exposed_s[state.ready_phase] += (now - rank.last_compute_end).seconds();
  rank.computing = true;
  rank.compute_started = now;
  const double seconds = kernel_seconds(rank, state.node.target);
  const NodeId host = rank.host;
  rank.kernel = compute_.run_for(std::span(&host, 1), std::span(&seconds, 1),
                                 [this, r, i] { kernel_done(r, i); });
  ++counts_.kernels;
}

void GraphExecutor::kernel_done(RankId r, NodeIndex i) {
  Rank& rank = ranks_[static_cast<std::size_t>(r)];
  const Time now = engine_.now();
  reports_[static_cast<std::size_t>(r)].compute_s += (now - rank.compute_started).seconds();
  rank.computing = false;
  rank.kernel = {};
  rank.last_compute_end = now;
  if (!rank.compute_queue.empty()) {
    const NodeIndex next = rank.compute_queue.front();
    rank.compute_queue.pop_front();
    start_kernel(r, next);
  }
  complete(r, i);
}

void GraphExecutor::complete(RankId r, NodeIndex i) {
  Rank& rank = ranks_[static_cast<std::size_t>(r)];
  NodeState& state = at(r, i);
  MLSIM_CHECK(!state.done, "a node finished twice");
  state.done = true;
  --rank.unfinished;
  ++counts_.nodes;
  last_progress_ = engine_.now();
  rank.last_phase = state.node.phase;
  const std::uint8_t phase = state.node.phase;
  const SmallVector<NodeIndex, 2> dependents = state.dependents;
  for (NodeIndex d : dependents) {
    NodeState& dep = at(r, d);
    dep.ready_phase = phase;
    if (--dep.waiting == 0) ready(r, d);
  }
  while (!rank.window.empty() && rank.window.front().done) {
    rank.window.pop_front();
    ++rank.base;
  }
  pull(r);
  RankReport& report = reports_[static_cast<std::size_t>(r)];
  if (rank.source_done && rank.unfinished == 0 && !report.done) {
    const Time now = engine_.now();
    if (now > rank.last_compute_end)
      report.exposed_s[rank.last_phase] += (now - rank.last_compute_end).seconds();
    rank.last_compute_end = now;
    report.done = true;
    report.finished = now;
    ++finished_ranks_;
    if (done() && on_done_) on_done_();
  }
}

void GraphExecutor::arrive(RankId r, NodeIndex i) {
  const NodeState& state = at(r, i);
  const auto g = static_cast<std::size_t>(state.node.target);
  const Group& group = source_.groups()[g];
  GroupState& gs = groups_[g];
  const Rank& rank = ranks_[static_cast<std::size_t>(r)];
  const int position =
      std::find_if(rank.positions.begin(), rank.positions.end(), [&](const auto& p) {
        return p.first == state.node.target;
      })->second;
  const int copies = rank.width / group.gpus_per_member;
  if (group.members.size() == 1) {  // nothing to wait for (a collapsed tensor-parallel group)
    const NodeRef self{r, i};
    launch(state.node, group.members, group.gpus_per_member, copies, std::span(&self, 1), gs.label);
    return;
  }
  auto [it, fresh] = gs.pending.try_emplace(state.seq);
  auto& pending = it->second;
  if (fresh) {
    pending.operation = state.node.operation;
    pending.bytes = state.node.bytes;
    pending.nodes.assign(group.members.size(), 0);
  }
  MLSIM_CHECK(pending.operation == state.node.operation && pending.bytes == state.node.bytes,
              "the members of a group reached different collectives");
  pending.nodes[static_cast<std::size_t>(position)] = i;
  if (++pending.arrived < static_cast<int>(group.members.size())) return;
  launching_.clear();
  for (std::size_t m = 0; m < group.members.size(); ++m)
    launching_.push_back({group.members[m], pending.nodes[m]});
  Node op;
  op.kind = NodeKind::kCollective;
  op.operation = pending.operation;
  op.bytes = pending.bytes;
  op.target = state.node.target;
  gs.pending.erase(it);
  launch(op, group.members, group.gpus_per_member, copies, launching_, gs.label);
}

void GraphExecutor::match(RankId r, NodeIndex i) {
  const NodeState& state = at(r, i);
  const bool send = state.node.kind == NodeKind::kSend;
  const RankId from = send ? r : state.node.target, to = send ? state.node.target : r;
  Channel& ch =
      channels_[(static_cast<std::uint64_t>(from) << 32) | static_cast<std::uint32_t>(to)];
  auto& mine = send ? ch.sends : ch.recvs;
  auto& theirs = send ? ch.recvs : ch.sends;
  const auto other = theirs.find(state.seq);
  if (other == theirs.end()) {
    mine.emplace(state.seq, i);
    return;
  }
  const NodeIndex peer_index = other->second;
  theirs.erase(other);
  const NodeIndex send_index = send ? i : peer_index, recv_index = send ? peer_index : i;
  MLSIM_CHECK(at(from, send_index).node.bytes == at(to, recv_index).node.bytes,
              "a send and its receive disagree on the message size");
  Node op;
  op.kind = NodeKind::kSend;
  op.operation = collectives::Operation::kSendRecv;
  op.bytes = state.node.bytes;
  const std::array<RankId, 2> pair = {from, to};
  const int copies = std::min(ranks_[static_cast<std::size_t>(from)].width,
                              ranks_[static_cast<std::size_t>(to)].width);
  const std::array<NodeRef, 2> ends = {NodeRef{from, send_index}, NodeRef{to, recv_index}};
  // The k-th message on this channel (state.seq, the send's and the receive's alike).
  launch(op, pair, 1, copies, ends, message_label(from, to, state.seq));
}

std::uint32_t GraphExecutor::new_active() {
  if (!free_active_.empty()) {
    const std::uint32_t slot = free_active_.back();
    free_active_.pop_back();
    return slot;
  }
  active_.emplace_back();
  return static_cast<std::uint32_t>(active_.size() - 1);
}

void GraphExecutor::launch(const Node& op, std::span<const RankId> ranks, int gpus, int copies,
                           std::span<const NodeRef> nodes, std::uint64_t label) {
  const std::uint32_t slot = new_active();
  active_[slot].nodes.assign(nodes.begin(), nodes.end());
  if (op.kind == NodeKind::kSend)
    ++counts_.messages;
  else
    ++counts_.collectives;
  const int participants = static_cast<int>(ranks.size()) * gpus;
  std::vector<NodeId>& hosts = hosts_;
  hosts.clear();
  bool one_host = true, distinct = true;
  for (RankId r : ranks) {
    const NodeId h = ranks_[static_cast<std::size_t>(r)].host;
    if (!hosts.empty() && h != hosts.front()) one_host = false;
    if (std::find(hosts.begin(), hosts.end(), h) != hosts.end()) distinct = false;
    hosts.push_back(h);
  }
  if (gpus > 1 && ranks.size() > 1) distinct = false;
  const collectives::Algorithm algorithm = collectives::algorithms_for(op.operation).front();
  Time duration;
  if (participants <= 1) {
    duration = Time::zero();
  } else if (one_host) {
    duration = intra_prices_.time(op.operation, participants, op.bytes,
                                  compute_.hardware().host(hosts.front()));
  } else if (options_.mode == CommunicationMode::kNetwork && distinct) {
    collectives::CollectiveSpec spec;
    spec.operation = op.operation;
    spec.algorithm = algorithm;
    spec.bytes = Bytes{op.bytes.count * copies};
    spec.window = 0;
    spec.costs = options_.costs;
    // What the operation is, not which slot it occupies (flow_labels.hpp): the training core
    // gives its messages and DP collectives the same labels.
    spec.flow_label = label;
    active_[slot].collective = std::make_unique<collectives::Collective>(
        engine_, network_, hosts, spec,
        [this, slot](const collectives::CollectiveResult&) {
          // Not from inside the collective's own callback: it is destroyed on release.
          active_[slot].event =
              engine_.schedule_in(Time::zero(), [this, slot] { finish_active(slot); });
        },
        &links_);
    if (on_failed_)
      active_[slot].collective->set_failure_callback(
          [this](const collectives::CollectiveResult&) { on_failed_(); });
    ++counts_.network_collectives;
    active_[slot].collective->start();
    return;
  } else {
    // The closed form the training core prices its DP collectives and messages with too.
    duration = closed_form_.time(op.operation, participants, op.bytes, hosts,
                                 ranks_[static_cast<std::size_t>(ranks.front())].host_gpus);
  }
  active_[slot].event = engine_.schedule_in(duration, [this, slot] { finish_active(slot); });
}

void GraphExecutor::finish_active(std::uint32_t slot) {
  Active& a = active_[slot];
  a.event = {};
  if (a.collective) network_delivered_ += a.collective->result().bytes_delivered.count;
  a.collective.reset();
  finishing_.assign(a.nodes.begin(), a.nodes.end());
  a.nodes.clear();
  free_active_.push_back(slot);
  for (const NodeRef& n : finishing_) complete(n.rank, n.index);
}

std::int64_t GraphExecutor::network_bytes_delivered() const {
  std::int64_t total = network_delivered_;
  for (const Active& a : active_)
    if (a.collective) total += a.collective->result().bytes_delivered.count;
  return total;
}

std::vector<std::string> GraphExecutor::stalled() const {
  std::vector<std::string> out;
  for (std::size_t r = 0; r < ranks_.size(); ++r) {
    if (reports_[r].done) continue;
    const Rank& rank = ranks_[r];
    std::string what = "no node";
    for (std::size_t k = 0; k < rank.window.size(); ++k)
      if (!rank.window[k].done) {
        what = fmt::format("node {} ({}, waiting on {} dependencies)", rank.base + k,
                           kind_name(rank.window[k].node.kind), rank.window[k].waiting);
        break;
      }
    out.push_back(fmt::format("rank {}: {}", r, what));
  }
  return out;
}

}  // namespace mlsim::workload
