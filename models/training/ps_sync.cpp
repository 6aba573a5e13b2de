#include "models/training/ps_sync.hpp"

#include "sim_core/base/error.hpp"

namespace mlsim::training {

PsSync::PsSync(SyncSetup setup) : CollectiveSync(std::move(setup), 2) {
  MLSIM_CHECK(!options_.servers.empty(), "parameter-server sync needs a server");
  set_partition(0);
}

void PsSync::set_partition(std::int64_t partition) {
  // Called at build and on a restart, with no chunk in flight: the keys are numbered anew.
  slots_.clear();
  const std::size_t layers = options_.layer_parameters.size();
  first_key_.assign(layers, 0);
  rounds_.assign(layers, {});
  chunks_.assign(layers, {});
  std::size_t key = 0;
  for (std::size_t l = 0; l < layers; ++l) {
    first_key_[l] = key;
    chunks_[l] = partition_tensor(options_.layer_parameters[l], partition);
    key += chunks_[l].size();
    rounds_[l].resize(chunks_[l].size());
  }
  if (!options_.in_order_connections) return;
  const std::size_t servers = options_.servers.size(), workers = options_.workers.size();
  connections_.assign(workers * servers, Connection{});
  slice_joins_.assign(layers, {});
  left_.assign(layers, {});
  for (std::size_t l = 0; l < layers; ++l) {
    slice_joins_[l].assign(chunks_[l].size() * servers * 2, 0);
    left_[l].assign(chunks_[l].size() * workers, Left{});
  }
}

std::int64_t PsSync::slice_values(std::int64_t parameters, std::uint32_t slice) const {
  if (!sliced(parameters)) return parameters;
  // The same even split as the sliced collective's shards (collectives::piece: sizes differ by
  // at most one value, the larger first).
  const auto servers = static_cast<std::int64_t>(options_.servers.size());
  return parameters / servers + (slice < parameters % servers ? 1 : 0);
}

std::size_t PsSync::slice_server(const Chunk& c, std::uint32_t slice) const {
  if (sliced(c.parameters)) return slice;
  return (first_key_[c.layer] + c.index) % options_.servers.size();
}

ChunkCollectives::Entry& PsSync::open(const Chunk& c, std::uint32_t copy) {
  ChunkCollectives::Entry& e = slots_.at(c.layer, c.index, copy);
  if (e.collective) {  // its round two rounds ago is over
    MLSIM_CHECK(e.collective->done() && e.collective->rearm(), "a ps round overlapped two others");
    return e;
  }
  std::vector<NodeId> participants;
  participants.reserve(options_.workers.size() + options_.servers.size());
  participants = options_.workers;
  collectives::CollectiveSpec spec = chunk_spec(collectives::Algorithm::kParameterServer, c);
  if (c.parameters > options_.bigarray_bound) {  // sliced over every server
    participants.insert(participants.end(), options_.servers.begin(), options_.servers.end());
    spec.servers = static_cast<int>(options_.servers.size());
  } else {
    participants.push_back(
        options_.servers[(first_key_[c.layer] + c.index) % options_.servers.size()]);
  }
  e.chunk = c;
  e.collective = std::make_unique<collectives::Collective>(
      engine_, network_, std::move(participants), spec, nullptr, options_.links);
  e.collective->set_participant_callback(
      [this, layer = c.layer, index = c.index](std::uint32_t p, collectives::ParticipantEvent ev) {
        on_participant(layer, index, p, ev);
      });
  watch(*e.collective);
  return e;
}

void PsSync::start(std::size_t worker, const Chunk& c) {
  MLSIM_CHECK(c.layer < rounds_.size() && c.index < rounds_[c.layer].size() &&
                  c.parameters == chunks_[c.layer][c.index],
              "a chunk outside the layout (partition changed with chunks in flight?)");
  Round& round = rounds_[c.layer][c.index];
  const std::uint32_t copy = round.round % 2;
  if (options_.in_order_connections) {
    // A worker starts round i+1 of a chunk only once its round i is back, which needs every
    // worker's push of round i: the rounds' count stays valid however long pushes queue.
    if (++round.joined == options_.workers.size()) round = Round{round.round + 1, 0};
    start_in_order(worker, c, copy);
    return;
  }
  collectives::Collective& collective =
      round.joined == 0 ? *open(c, copy).collective : *slots_.at(c.layer, c.index, copy).collective;
  // Every worker joined this round: the next push of the chunk opens the next one.
  if (++round.joined == options_.workers.size()) round = Round{round.round + 1, 0};
  collective.join(static_cast<std::uint32_t>(worker));
}

void PsSync::on_participant(std::uint32_t layer, std::uint32_t index, std::uint32_t worker,
                            collectives::ParticipantEvent e) {
  const Chunk chunk{layer, index, chunks_[layer][index]};
  if (e == collectives::ParticipantEvent::kSent) {
    if (!options_.credit_until_pull) events_.on_chunk(worker, chunk, true, false);
  } else {
    events_.on_chunk(worker, chunk, options_.credit_until_pull, true);
  }
}

void PsSync::start_in_order(std::size_t worker, const Chunk& c, std::uint32_t copy) {
  const std::size_t servers = options_.servers.size();
  const bool is_sliced = sliced(c.parameters);
  Left& left = left_[c.layer][std::size_t{c.index} * options_.workers.size() + worker];
  MLSIM_CHECK(left.pushes == 0 && left.pulls == 0,
              "a chunk started again on a worker before "
              "its last round was back");
  // Worker w queues its slices from server w mod servers on, as the sliced collective pushes
  // its shards (so that with per-message costs the workers' first slices go to different
  // servers).
  std::vector<std::uint32_t> slices;
  if (is_sliced) {
    for (std::size_t j = 0; j < servers; ++j) {
      const auto slice = static_cast<std::uint32_t>((j + worker) % servers);
      if (slice_values(c.parameters, slice) > 0) slices.push_back(slice);
    }
  } else {
    slices.push_back(0);
  }
  left = Left{static_cast<std::uint32_t>(slices.size()), static_cast<std::uint32_t>(slices.size())};
  for (const std::uint32_t slice : slices) {
    const std::size_t server = slice_server(c, slice);
    Connection& conn = connections_[worker * servers + server];
    conn.queue.push_back(Pending{c.layer, c.index, slice, copy});
    if (!conn.busy) dispatch(worker, server);
  }
}

void PsSync::dispatch(std::size_t worker, std::size_t server) {
  Connection& conn = connections_[worker * options_.servers.size() + server];
  if (conn.busy || conn.queue.empty()) return;
  const Pending p = conn.queue.front();
  conn.queue.pop_front();
  conn.busy = true;
  const Chunk c{p.layer, p.index, chunks_[p.layer][p.index]};
  std::uint32_t& joins = slice_joins_[p.layer][slot_index(p.index, p.slice) * 2 + p.copy];
  collectives::Collective& collective =
      joins == 0
          ? *open_slice(c, p.slice, p.copy).collective
          : *slots_.at(p.layer, static_cast<std::uint32_t>(slot_index(p.index, p.slice)), p.copy)
                 .collective;
  if (++joins == options_.workers.size()) joins = 0;  // the next join is two rounds later
  collective.join(static_cast<std::uint32_t>(worker));
}

ChunkCollectives::Entry& PsSync::open_slice(const Chunk& c, std::uint32_t slice,
                                            std::uint32_t copy) {
  ChunkCollectives::Entry& e =
      slots_.at(c.layer, static_cast<std::uint32_t>(slot_index(c.index, slice)), copy);
  if (e.collective) {  // its round two rounds ago is over
    MLSIM_CHECK(e.collective->done() && e.collective->rearm(), "a ps round overlapped two others");
    return e;
  }
  std::vector<NodeId> participants = options_.workers;
  participants.push_back(options_.servers[slice_server(c, slice)]);
  collectives::CollectiveSpec spec = chunk_spec(collectives::Algorithm::kParameterServer, c);
  spec.bytes = Bytes{slice_values(c.parameters, slice) * options_.bytes_per_parameter};
  e.chunk = c;
  e.collective = std::make_unique<collectives::Collective>(
      engine_, network_, std::move(participants), spec, nullptr, options_.links);
  e.collective->set_participant_callback([this, layer = c.layer, index = c.index, slice](
                                             std::uint32_t p, collectives::ParticipantEvent ev) {
    on_slice(layer, index, slice, p, ev);
  });
  watch(*e.collective);
  return e;
}

void PsSync::on_slice(std::uint32_t layer, std::uint32_t index, std::uint32_t slice,
                      std::uint32_t worker, collectives::ParticipantEvent e) {
  const Chunk chunk{layer, index, chunks_[layer][index]};
  Left& left = left_[layer][std::size_t{index} * options_.workers.size() + worker];
  if (e == collectives::ParticipantEvent::kSent) {
    // The push arrived: the connection takes its next message.
    const std::size_t server = slice_server(chunk, slice);
    connections_[worker * options_.servers.size() + server].busy = false;
    dispatch(worker, server);
    MLSIM_CHECK(left.pushes > 0, "a slice pushed twice");
    if (--left.pushes == 0 && !options_.credit_until_pull)
      events_.on_chunk(worker, chunk, true, false);
  } else {
    MLSIM_CHECK(left.pulls > 0, "a slice pulled twice");
    if (--left.pulls == 0) events_.on_chunk(worker, chunk, options_.credit_until_pull, true);
  }
}

}  // namespace mlsim::training
