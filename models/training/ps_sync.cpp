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

}  // namespace mlsim::training
