#pragma once
// Per-participant send queues with a window: the one place where collective algorithms touch the
// network. Algorithms hand messages over; the sender starts at most `window` transfers per
// participant at a time (0 = no limit), in the order they were handed over, and reports each
// delivered message to the algorithm.
#include <cstdint>
#include <span>
#include <vector>

#include "sim_core/network/network.hpp"

namespace mlsim::collectives {

// A message between participants (indices into the collective's participant list).
struct Message {
  std::uint32_t from = 0, to = 0;
  std::uint64_t tag = 0;  // what the algorithm needs to know on delivery (step, piece, phase)
  Bytes bytes;
};

class MessageSink {
 public:
  virtual ~MessageSink() = default;
  virtual void on_message(const Message& m) = 0;
};

// The ECMP label of every transfer from participant `from` to `to`: one label per (src, dst)
// pair, like one connection per peer. Planners use it to know which route a message will take.
std::uint64_t transfer_label(std::uint64_t flow_label, std::uint32_t from, std::uint32_t to);

class Sender {
 public:
  // `nodes[i]` is participant i's node. Network must outlive the sender.
  Sender(Network& network, std::vector<NodeId> nodes, int window, std::uint64_t flow_label);
  void set_sink(MessageSink* sink) { sink_ = sink; }

  void send(const Message& m);

  Bytes bytes_sent() const { return bytes_sent_; }
  std::uint64_t transfers() const { return transfers_; }
  std::uint64_t failed() const { return failed_; }

 private:
  // Messages waiting for a send slot, per participant: a vector consumed from `head`.
  struct Queue {
    std::vector<Message> messages;
    std::size_t head = 0;
    bool empty() const { return head == messages.size(); }
  };

  void pump(std::uint32_t participant);
  void transmit(const Message& m);
  void on_delivered(const Message& m, bool failed);

  Network& network_;
  std::vector<NodeId> nodes_;
  std::uint32_t window_;
  std::uint64_t flow_label_;
  MessageSink* sink_ = nullptr;
  std::vector<Queue> queues_;
  std::vector<std::uint32_t> in_flight_;
  Bytes bytes_sent_;
  std::uint64_t transfers_ = 0, failed_ = 0;
};

}  // namespace mlsim::collectives
