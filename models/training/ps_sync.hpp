#pragma once
// Parameter-server synchronisation, MXNet kvstore style: each worker pushes a chunk as soon as
// its scheduler releases it, without waiting for the other workers; a server answers a slice's
// pulls once every worker pushed it. A chunk larger than `bigarray_bound` values is sliced
// evenly over all servers, otherwise it goes whole to server (key mod servers), keys numbered
// over (layer, chunk). Each round of a chunk is one sim_core parameter-server collective whose
// workers join as they push (Collective::join); two collectives per chunk take the rounds in
// turn (round i+1 can start before round i's last pull arrived, never before round i-1 ended); its
// kSent event gives the worker's credit back (or its kHolds event, with credit_until_pull), its
// kHolds event is the chunk's arrival.
//
// With SyncOptions::in_order_connections (ps-lite's one in-order connection per server), each
// worker keeps one queue per server: a push joins its collective only once the worker's earlier
// pushes to that server arrived. A chunk sliced over every server is then one one-server
// collective per slice (slice k to server k, k-th even share of the values; empty slices are not
// sent, as ps-lite's KVWorker::Send skips them), each in its server's queue; the chunk's kSent
// is its last slice's push arriving, its arrival its last slice's pull.
#include <deque>
#include <vector>

#include "models/training/collective_sync.hpp"

namespace mlsim::training {

class PsSync final : public CollectiveSync {
 public:
  explicit PsSync(SyncSetup setup);

  Entry entry() const override { return Entry::kPerWorker; }
  bool one_tensor_at_a_time() const override { return false; }
  bool layout_matters() const override { return true; }
  void set_partition(std::int64_t partition) override;
  void start(std::size_t worker, const Chunk& chunk) override;

 private:
  struct Round {
    std::uint32_t round = 0;   // of this chunk; its collective is copy round % 2
    std::uint32_t joined = 0;  // workers that joined it
  };
  ChunkCollectives::Entry& open(const Chunk& chunk, std::uint32_t copy);
  void on_participant(std::uint32_t layer, std::uint32_t index, std::uint32_t worker,
                      collectives::ParticipantEvent e);

  // in_order_connections: one message of a chunk to one server, waiting on the connection.
  struct Pending {
    std::uint32_t layer = 0, index = 0, slice = 0, copy = 0;
  };
  struct Connection {
    std::deque<Pending> queue;  // started, not yet pushed
    bool busy = false;          // a push on the wire (joined, not yet arrived)
  };
  struct Left {
    std::uint32_t pushes = 0, pulls = 0;  // the chunk's slices not yet pushed / pulled
  };
  void start_in_order(std::size_t worker, const Chunk& chunk, std::uint32_t copy);
  void dispatch(std::size_t worker, std::size_t server);
  ChunkCollectives::Entry& open_slice(const Chunk& chunk, std::uint32_t slice, std::uint32_t copy);
  void on_slice(std::uint32_t layer, std::uint32_t index, std::uint32_t slice, std::uint32_t worker,
                collectives::ParticipantEvent e);
  bool sliced(std::int64_t parameters) const { return parameters > options_.bigarray_bound; }
  // Values of slice `slice` of a chunk of `parameters` (the whole chunk when it is not sliced).
  std::int64_t slice_values(std::int64_t parameters, std::uint32_t slice) const;
  std::size_t slice_server(const Chunk& chunk, std::uint32_t slice) const;
  std::size_t slot_index(std::uint32_t index, std::uint32_t slice) const {
    return std::size_t{index} * options_.servers.size() + slice;
  }

  std::vector<std::size_t> first_key_;             // per layer: key of its chunk 0
  std::vector<std::vector<Round>> rounds_;         // per layer and chunk
  std::vector<std::vector<std::int64_t>> chunks_;  // per layer: the chunks' parameters
  // in_order_connections only:
  std::vector<Connection> connections_;  // per (worker, server): worker * servers + server
  // per layer, (slot_index(index, slice) * 2 + copy): workers that joined the slice's
  // collective in its current round (its first join rearms it)
  std::vector<std::vector<std::uint32_t>> slice_joins_;
  // per layer, (index * workers + worker): the round in flight on that worker
  std::vector<std::vector<Left>> left_;
};

}  // namespace mlsim::training
