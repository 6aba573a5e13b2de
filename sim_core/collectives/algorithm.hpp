#pragma once
// The interface between a Collective and its algorithm (ring.cpp, tree.cpp,
// parameter_server.cpp, rat.cpp, direct.cpp). An algorithm sends messages through the Sender, is
// told of each delivery, and says when every participant has the result.
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "sim_core/base/error.hpp"
#include "sim_core/collectives/collective.hpp"
#include "sim_core/collectives/sender.hpp"
#include "sim_core/network/link_conditions.hpp"

namespace mlsim::collectives {

class CollectiveAlgorithm : public MessageSink {
 public:
  CollectiveAlgorithm(Collective& owner, Sender& sender) : owner_(owner), sender_(sender) {}
  virtual void start() = 0;
  // Deliveries so far / deliveries needed.
  virtual double progress() const = 0;
  // Participants that hold the tensor (the n of the bus-bandwidth factor).
  virtual int ranks() const = 0;
  // See CollectiveResult::verified_pieces; nullopt for algorithms that do not follow the data.
  virtual std::optional<std::uint64_t> verified_pieces() const { return std::nullopt; }
  // Collective::rearm: back to the state before start(), for another round of the same
  // collective. Algorithms that support it return true.
  virtual bool rearm() { return false; }
  // Staggered entry (Collective::join): algorithms that support it start one participant's part.
  virtual bool supports_join() const { return false; }
  virtual void join(std::uint32_t /*participant*/) {
    MLSIM_CHECK(false, "this collective algorithm has no staggered entry");
  }

 protected:
  void send(std::uint32_t from, std::uint32_t to, std::uint64_t tag, Bytes bytes) {
    sender_.send(Message{from, to, tag, bytes});
  }
  void finished() { owner_.finish(); }
  // The algorithm's own delays go through the sender, which drops them on cancel.
  template <typename F>
  void defer(Time at, F f) {
    sender_.defer(at, std::move(f));
  }
  void participant_event(std::uint32_t p, ParticipantEvent e) { owner_.participant_event(p, e); }
  Engine& engine() const { return owner_.engine(); }

 private:
  Collective& owner_;
  Sender& sender_;
};

// Deliveries so far over deliveries needed, 1 when none are needed (progress()).
inline double fraction_done(std::uint64_t done, std::uint64_t needed) {
  return needed ? static_cast<double>(done) / static_cast<double>(needed) : 1.0;
}

// Piece i of `total` cut into `parts` pieces whose sizes differ by at most one byte.
inline Bytes piece(Bytes total, std::int64_t parts, std::int64_t i) {
  return Bytes{total.count / parts + (i < total.count % parts ? 1 : 0)};
}

// ring uses the link conditions, when given, to lay its channels out by region.
std::unique_ptr<CollectiveAlgorithm> make_ring(Collective& owner, Sender& sender,
                                               const std::vector<NodeId>& participants,
                                               const CollectiveSpec& spec,
                                               const LinkConditions* links);
std::unique_ptr<CollectiveAlgorithm> make_tree(Collective& owner, Sender& sender,
                                               std::uint32_t participants,
                                               const CollectiveSpec& spec);
std::unique_ptr<CollectiveAlgorithm> make_parameter_server(Collective& owner, Sender& sender,
                                                           std::uint32_t participants,
                                                           const CollectiveSpec& spec);
// nvls: participant index n is the switch (the Sender's extra node).
std::unique_ptr<CollectiveAlgorithm> make_nvls(Collective& owner, Sender& sender,
                                               std::uint32_t participants,
                                               const CollectiveSpec& spec);
// send_recv and all_to_all.
std::unique_ptr<CollectiveAlgorithm> make_direct(Collective& owner, Sender& sender,
                                                 std::uint32_t participants,
                                                 const CollectiveSpec& spec);
// rat plans with the participants' nodes and the current link conditions.
std::unique_ptr<CollectiveAlgorithm> make_rat(Collective& owner, Sender& sender,
                                              const std::vector<NodeId>& participants,
                                              const CollectiveSpec& spec,
                                              const LinkConditions& links);

}  // namespace mlsim::collectives
