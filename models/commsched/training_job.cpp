#include "models/commsched/training_job.hpp"

#include <algorithm>

#include "sim_core/base/error.hpp"

namespace mlsim::commsched {
namespace {

Order order_of(SchedulerKind kind) {
  return kind == SchedulerKind::kFifo ? Order::kReady : Order::kLayer;
}

}  // namespace

SchedulerConfig fifo_config(Mode mode) {
  return mode == Mode::kParameterServer ? SchedulerConfig{0, 0} : SchedulerConfig{0, 1};
}

TrainingJob::Worker::Worker(Order order, std::int64_t credit, std::size_t layers)
    : updated(layers, 0),
      chunks_left(layers, 0),
      pushes_left(layers),
      pulls_left(layers),
      scheduler(order, credit) {}

TrainingJob::TrainingJob(Engine& engine, Network& network, Compute& compute, JobSpec spec,
                         SchedulerConfig initial)
    : engine_(engine),
      network_(network),
      compute_(compute),
      spec_(std::move(spec)),
      config_(spec_.scheduler == SchedulerKind::kFifo ? fifo_config(spec_.mode) : initial),
      shared_scheduler_(order_of(spec_.scheduler), config_.credit) {
  MLSIM_CHECK(!spec_.layers.empty() && !spec_.workers.empty() && spec_.iterations > 0,
              "a job needs layers, workers and iterations");
  MLSIM_CHECK(spec_.worker_times.empty() ||
                  (spec_.worker_times.size() == spec_.workers.size() &&
                   std::all_of(spec_.worker_times.begin(), spec_.worker_times.end(),
                               [&](const auto& t) { return t.size() == spec_.layers.size(); })),
              "worker times need one entry per worker and layer");
  MLSIM_CHECK(spec_.mode == Mode::kAllReduce || !spec_.servers.empty(), "PS mode needs a server");
  const std::size_t layers = spec_.layers.size();
  for (std::size_t w = 0; w < spec_.workers.size(); ++w)
    workers_.emplace_back(order_of(spec_.scheduler), config_.credit, layers);
  chunks_.resize(layers);
  produced_.assign(layers, 0);
  ring_deliveries_.resize(layers);
  layer_chunks_left_.assign(layers, 0);
  if (spec_.mode == Mode::kParameterServer) set_partition(config_.partition);
}

void TrainingJob::start() {
  for (std::size_t w = 0; w < workers_.size(); ++w) try_start(w);
}

double TrainingJob::progress() const {
  return static_cast<double>(iterations_done_) /
         static_cast<double>(spec_.iterations * workers_.size());
}

std::vector<double> TrainingJob::iteration_seconds() const {
  std::vector<double> out;
  for (std::size_t i = 0; i < iteration_starts_.size(); ++i) {
    const Time end = i + 1 < iteration_starts_.size() ? iteration_starts_[i + 1] : finish_;
    out.push_back((end - iteration_starts_[i]).seconds());
  }
  return out;
}

std::vector<double> TrainingJob::take_compute_slowdown() {
  std::vector<double> out;
  for (Worker& wk : workers_) {
    out.push_back(wk.nominal_s > 0 ? wk.actual_s / wk.nominal_s : 1.0);
    wk.nominal_s = wk.actual_s = 0;
  }
  return out;
}

void TrainingJob::try_start(std::size_t w) {
  Worker& wk = workers_[w];
  if (wk.busy || wk.computing_done) return;
  const std::size_t layers = spec_.layers.size();
  std::size_t layer = 0;
  Time nominal;
  if (wk.forward) {
    if (wk.position == 0 && wk.iteration >= gate_) return;  // a restart is draining the job
    layer = wk.position;
    if (wk.updated[layer] < wk.iteration) return;  // its parameters are not back yet
    if (w == 0 && layer == 0) iteration_starts_.push_back(engine_.now());
    nominal = spec_.worker_times.empty() ? spec_.layers[layer].forward
                                         : spec_.worker_times[w][layer].forward;
  } else {
    layer = layers - 1 - wk.position;
    nominal = spec_.worker_times.empty() ? spec_.layers[layer].backward
                                         : spec_.worker_times[w][layer].backward;
  }
  wk.nominal_s += nominal.seconds();
  wk.op_started = engine_.now();
  wk.busy = true;
  const bool forward = wk.forward;
  compute_.run(spec_.workers[w], FixedWork{nominal},
               [this, w, layer, forward] { op_done(w, layer, forward); });
}

void TrainingJob::op_done(std::size_t w, std::size_t layer, bool forward) {
  Worker& wk = workers_[w];
  wk.busy = false;
  wk.actual_s += (engine_.now() - wk.op_started).seconds();
  const std::size_t layers = spec_.layers.size();
  if (forward) {
    if (++wk.position == layers) {
      wk.forward = false;
      wk.position = 0;
    }
  } else {
    ++wk.position;
    const bool last = wk.position == layers;
    if (last) {
      ++iterations_done_;
      ++wk.iteration;
      wk.forward = true;
      wk.position = 0;
      if (wk.iteration == spec_.iterations) wk.computing_done = true;
    }
    gradient_ready(w, layer);
    if (last && w == 0 && controller_ && !wk.computing_done)
      if (auto d = controller_->at_iteration(wk.iteration, *this)) apply(*d, wk.iteration);
    if (last) {
      maybe_resume();
      check_finished();
    }
  }
  try_start(w);
}

CreditScheduler& TrainingJob::scheduler_of(std::size_t w) {
  return spec_.mode == Mode::kParameterServer ? workers_[w].scheduler : shared_scheduler_;
}

void TrainingJob::gradient_ready(std::size_t w, std::size_t layer) {
  Worker& wk = workers_[w];
  const auto l = static_cast<std::uint32_t>(layer);
  if (spec_.layers[layer].parameters == 0) {  // nothing to send: the layer is up to date
    ++wk.updated[layer];
    return;
  }
  if (spec_.mode == Mode::kParameterServer) {
    const auto& chunks = chunks_[layer];
    wk.chunks_left[layer] = static_cast<std::uint32_t>(chunks.size());
    wk.pushes_left[layer].assign(chunks.size(), 0);
    wk.pulls_left[layer].assign(chunks.size(), 0);
    ++pending_updates_;
    for (std::size_t i = 0; i < chunks.size(); ++i)
      wk.scheduler.ready(Chunk{l, static_cast<std::uint32_t>(i), chunks[i]});
    pump(w);
    return;
  }
  if (++produced_[layer] < workers_.size()) return;
  produced_[layer] = 0;
  chunks_[layer] = partition_tensor(spec_.layers[layer].parameters, config_.partition);
  ring_deliveries_[layer].assign(chunks_[layer].size(), 0);
  layer_chunks_left_[layer] = static_cast<std::uint32_t>(chunks_[layer].size());
  pending_updates_ += workers_.size();
  for (std::size_t i = 0; i < chunks_[layer].size(); ++i)
    shared_scheduler_.ready(Chunk{l, static_cast<std::uint32_t>(i), chunks_[layer][i]});
  pump(0);
}

void TrainingJob::pump(std::size_t w) {
  CreditScheduler& s = scheduler_of(w);
  while (auto chunk = s.next()) {
    record(ChunkEvent::Kind::kStart, w, *chunk);
    start_chunk(w, *chunk);
  }
}

void TrainingJob::start_chunk(std::size_t w, const Chunk& c) {
  if (spec_.mode == Mode::kParameterServer) {
    const std::uint32_t n = slice_count(c.layer, c.index);
    workers_[w].pushes_left[c.layer][c.index] = n;
    workers_[w].pulls_left[c.layer][c.index] = n;
    for (std::uint32_t s = 0; s < n; ++s)
      send(spec_.workers[w], spec_.servers[server_of(c.layer, c.index, s)],
           slice_parameters(c.layer, c.index, s) * spec_.bytes_per_parameter,
           Message{Message::Kind::kPush, static_cast<std::uint32_t>(w), c.layer, c.index, s});
    return;
  }
  if (workers_.size() == 1) {  // nothing to reduce with
    engine_.schedule_in(Time::zero(), [this, c] { chunk_done(0, c, true, true); });
    return;
  }
  for (std::size_t sender = 0; sender < workers_.size(); ++sender)
    ring_step(c.layer, c.index, sender, 0);
}

void TrainingJob::send(NodeId src, NodeId dst, std::int64_t bytes, Message m) {
  bytes_sent_ += bytes;
  ++messages_;
  auto go = [this, src, dst, bytes, m] {
    network_.start_transfer(src, dst, Bytes{bytes},
                            [this, m](const TransferResult& r) { delivered(m, r); });
  };
  Time ready = engine_.now();
  if (spec_.message_cpu > Time::zero()) {
    Time& free = sender_free_[src];
    free = std::max(free, ready) + spec_.message_cpu;
    ready = free;
  }
  ready += spec_.message_overhead;
  if (ready == engine_.now())
    go();
  else
    engine_.schedule_at(ready, go);
}

void TrainingJob::delivered(const Message& m, const TransferResult& r) {
  MLSIM_CHECK(!r.failed, "a gradient transfer failed (the commsched model assumes no failures)");
  bytes_delivered_ += r.bytes.count;
  switch (m.kind) {
    case Message::Kind::kPush:
      push_delivered(m.worker, m.layer, m.chunk, m.part);
      break;
    case Message::Kind::kPull:
      pull_delivered(m.worker, m.layer, m.chunk);
      break;
    case Message::Kind::kRing: {
      const auto n = static_cast<std::uint32_t>(workers_.size());
      const std::uint32_t steps = 2 * (n - 1);
      if (m.part + 1 < steps) ring_step(m.layer, m.chunk, m.worker, m.part + 1);
      if (++ring_deliveries_[m.layer][m.chunk] == n * steps)
        chunk_done(0, Chunk{m.layer, m.chunk, chunks_[m.layer][m.chunk]}, true, true);
      break;
    }
  }
}

std::uint32_t TrainingJob::slice_count(std::uint32_t layer, std::uint32_t chunk) const {
  const bool sliced = chunks_[layer][chunk] > spec_.bigarray_bound;
  return sliced ? static_cast<std::uint32_t>(spec_.servers.size()) : 1;
}

std::int64_t TrainingJob::slice_parameters(std::uint32_t layer, std::uint32_t chunk,
                                           std::uint32_t slice) const {
  const std::int64_t params = chunks_[layer][chunk];
  const auto n = static_cast<std::int64_t>(slice_count(layer, chunk));
  return params / n + (static_cast<std::int64_t>(slice) < params % n ? 1 : 0);
}

std::size_t TrainingJob::server_of(std::uint32_t layer, std::uint32_t chunk,
                                   std::uint32_t slice) const {
  if (slice_count(layer, chunk) > 1) return slice;
  return (first_key_[layer] + chunk) % spec_.servers.size();
}

void TrainingJob::set_partition(std::int64_t partition) {
  const std::size_t layers = spec_.layers.size();
  first_key_.assign(layers, 0);
  pushes_.assign(layers, {});
  std::size_t key = 0;
  for (std::size_t l = 0; l < layers; ++l) {
    chunks_[l] = partition_tensor(spec_.layers[l].parameters, partition);
    first_key_[l] = key;
    key += chunks_[l].size();
    for (std::size_t c = 0; c < chunks_[l].size(); ++c)
      pushes_[l].emplace_back(
          slice_count(static_cast<std::uint32_t>(l), static_cast<std::uint32_t>(c)), 0);
  }
}

void TrainingJob::push_delivered(std::size_t w, std::uint32_t layer, std::uint32_t chunk,
                                 std::uint32_t slice) {
  if (--workers_[w].pushes_left[layer][chunk] == 0 && spec_.credit_scope == CreditScope::kPush)
    chunk_done(w, Chunk{layer, chunk, chunks_[layer][chunk]}, true, false);
  std::uint32_t& count = pushes_[layer][chunk][slice];
  if (++count < workers_.size()) return;
  count = 0;  // every worker pushed: the server answers the pulls with the aggregate
  const NodeId server = spec_.servers[server_of(layer, chunk, slice)];
  const std::int64_t bytes = slice_parameters(layer, chunk, slice) * spec_.bytes_per_parameter;
  for (std::size_t v = 0; v < workers_.size(); ++v)
    send(server, spec_.workers[v], bytes,
         Message{Message::Kind::kPull, static_cast<std::uint32_t>(v), layer, chunk, slice});
}

void TrainingJob::pull_delivered(std::size_t w, std::uint32_t layer, std::uint32_t chunk) {
  if (--workers_[w].pulls_left[layer][chunk] > 0) return;
  chunk_done(w, Chunk{layer, chunk, chunks_[layer][chunk]},
             spec_.credit_scope == CreditScope::kPushPull, true);
}

void TrainingJob::ring_step(std::uint32_t layer, std::uint32_t chunk, std::size_t sender,
                            std::uint32_t step) {
  const std::size_t n = workers_.size();
  const std::size_t receiver = (sender + 1) % n;
  const std::int64_t bytes = chunks_[layer][chunk] * spec_.bytes_per_parameter;
  const auto segment = (bytes + static_cast<std::int64_t>(n) - 1) / static_cast<std::int64_t>(n);
  send(spec_.workers[sender], spec_.workers[receiver], segment,
       Message{Message::Kind::kRing, static_cast<std::uint32_t>(receiver), layer, chunk, step});
}

void TrainingJob::chunk_done(std::size_t w, const Chunk& c, bool release, bool arrived) {
  if (release) {
    scheduler_of(w).completed(c);
    record(ChunkEvent::Kind::kComplete, w, c);
  }
  if (arrived) {
    if (spec_.mode == Mode::kParameterServer) {
      if (--workers_[w].chunks_left[c.layer] == 0) layer_updated(w, c.layer);
    } else if (--layer_chunks_left_[c.layer] == 0) {
      for (std::size_t v = 0; v < workers_.size(); ++v) layer_updated(v, c.layer);
    }
  }
  if (release) pump(w);
  maybe_resume();
  check_finished();
}

void TrainingJob::layer_updated(std::size_t w, std::size_t layer) {
  ++workers_[w].updated[layer];
  --pending_updates_;
  try_start(w);
}

void TrainingJob::apply(const Decision& d, std::size_t iteration) {
  if (d.config == config_ && !restart_) return;
  ConfigChange change{engine_.now(), engine_.now(), iteration, config_, d.config, false};
  if (spec_.mode == Mode::kParameterServer && d.config.partition != config_.partition) {
    // The kvstore's keys change: stop, drain, restart with the new partition.
    change.restart = true;
    changes_.push_back(change);
    restart_ = d;
    gate_ = iteration;
    restart_decided_ = engine_.now();
    return;
  }
  config_ = d.config;
  shared_scheduler_.set_credit(config_.credit);
  for (Worker& wk : workers_) wk.scheduler.set_credit(config_.credit);
  changes_.push_back(change);
}

void TrainingJob::maybe_resume() {
  if (!restart_ || resuming_ || pending_updates_ > 0) return;
  for (const Worker& wk : workers_)
    if (!(wk.forward && wk.position == 0 && !wk.busy && wk.iteration == gate_)) return;
  resuming_ = true;
  engine_.schedule_in(restart_->pause, [this] {
    config_ = restart_->config;
    set_partition(config_.partition);
    for (Worker& wk : workers_) wk.scheduler.set_credit(config_.credit);
    paused_ += engine_.now() - restart_decided_;
    changes_.back().applied = engine_.now();
    restart_.reset();
    gate_ = static_cast<std::size_t>(-1);
    resuming_ = false;
    for (std::size_t w = 0; w < workers_.size(); ++w) try_start(w);
  });
}

void TrainingJob::check_finished() {
  if (finished_ || pending_updates_ > 0) return;
  for (const Worker& wk : workers_)
    if (!wk.computing_done) return;
  finished_ = true;
  finish_ = engine_.now();
}

void TrainingJob::record(ChunkEvent::Kind kind, std::size_t w, const Chunk& c) {
  if (!spec_.record_trace) return;
  const std::size_t owner = spec_.mode == Mode::kParameterServer ? w : 0;
  trace_.push_back(ChunkEvent{kind, engine_.now(), owner, workers_[owner].updated[c.layer], c,
                              scheduler_of(w).credit_left()});
}

}  // namespace mlsim::commsched
