#include "models/training/ps_sync.hpp"

#include "sim_core/base/error.hpp"

namespace mlsim::training {

PsSync::PsSync(SyncSetup setup) : CollectiveSync(std::move(setup)) {
  MLSIM_CHECK(!options_.servers.empty(), "parameter-server sync needs a server");
  set_partition(0);
}

void PsSync::set_partition(std::int64_t partition) {
  const std::size_t layers = options_.layer_parameters.size();
  first_key_.assign(layers, 0);
  open_.assign(layers, {});
  std::size_t key = 0;
  for (std::size_t l = 0; l < layers; ++l) {
    first_key_[l] = key;
    const std::size_t chunks = partition_tensor(options_.layer_parameters[l], partition).size();
    key += chunks;
    open_[l].resize(chunks);
  }
}

std::uint32_t PsSync::open(const Chunk& c) {
  const std::uint32_t slot = slots_.reserve(c);
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
  auto& collective = slots_[slot].collective;
  collective = std::make_unique<collectives::Collective>(
      engine_, network_, std::move(participants), spec,
      [this, slot](const collectives::CollectiveResult&) { slots_.retire(slot); });
  collective->set_participant_callback(
      [this, slot](std::uint32_t p, collectives::ParticipantEvent e) {
        on_participant(slot, p, e);
      });
  return slot;
}

void PsSync::start(std::size_t worker, const Chunk& c) {
  MLSIM_CHECK(c.layer < open_.size() && c.index < open_[c.layer].size(),
              "a chunk outside the layout (partition changed with chunks in flight?)");
  Round& round = open_[c.layer][c.index];
  if (round.slot == kNone) round.slot = open(c);
  const std::uint32_t slot = round.slot;
  // Every worker joined this round: the next push of the chunk opens the next one.
  if (++round.joined == options_.workers.size()) round = Round{};
  slots_[slot].collective->join(static_cast<std::uint32_t>(worker));
}

void PsSync::on_participant(std::uint32_t slot, std::uint32_t worker,
                            collectives::ParticipantEvent e) {
  const Chunk chunk = slots_[slot].chunk;
  if (e == collectives::ParticipantEvent::kSent) {
    if (!options_.credit_until_pull) events_.on_chunk(worker, chunk, true, false);
  } else {
    events_.on_chunk(worker, chunk, options_.credit_until_pull, true);
  }
}

}  // namespace mlsim::training
