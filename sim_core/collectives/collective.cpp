#include "sim_core/collectives/collective.hpp"

#include <algorithm>
#include <array>

#include "sim_core/base/error.hpp"
#include "sim_core/collectives/algorithm.hpp"
#include "sim_core/collectives/rat_plan.hpp"
#include "sim_core/collectives/ring_bottleneck.hpp"
#include "sim_core/collectives/sender.hpp"

namespace mlsim::collectives {

std::string_view to_string(Operation o) {
  switch (o) {
    case Operation::kAllReduce:
      return "all_reduce";
    case Operation::kReduceScatter:
      return "reduce_scatter";
    case Operation::kAllGather:
      return "all_gather";
    case Operation::kBroadcast:
      return "broadcast";
    case Operation::kSendRecv:
      return "send_recv";
    case Operation::kAllToAll:
      return "all_to_all";
  }
  return "?";
}

double bus_factor(Operation o, int ranks) {
  if (ranks < 1) return 0;
  switch (o) {
    case Operation::kAllReduce:
      return 2.0 * (ranks - 1) / ranks;
    case Operation::kReduceScatter:
    case Operation::kAllGather:
    case Operation::kAllToAll:
      return 1.0 * (ranks - 1) / ranks;
    case Operation::kBroadcast:
    case Operation::kSendRecv:
      return 1.0;
  }
  return 1.0;
}

std::span<const Algorithm> algorithms_for(Operation o) {
  static constexpr Algorithm kAllReduce[] = {Algorithm::kRing, Algorithm::kParameterServer,
                                             Algorithm::kTree, Algorithm::kRat, Algorithm::kNvls};
  static constexpr Algorithm kRingOnly[] = {Algorithm::kRing};
  static constexpr Algorithm kBroadcast[] = {Algorithm::kTree};
  static constexpr Algorithm kDirect[] = {Algorithm::kDirect};
  switch (o) {
    case Operation::kAllReduce:
      return kAllReduce;
    case Operation::kReduceScatter:
    case Operation::kAllGather:
      return kRingOnly;
    case Operation::kBroadcast:
      return kBroadcast;
    case Operation::kSendRecv:
    case Operation::kAllToAll:
      return kDirect;
  }
  return {};
}

std::string_view to_string(Algorithm a) {
  switch (a) {
    case Algorithm::kRing:
      return "ring";
    case Algorithm::kParameterServer:
      return "ps";
    case Algorithm::kTree:
      return "tree";
    case Algorithm::kRat:
      return "rat";
    case Algorithm::kDirect:
      return "direct";
    case Algorithm::kNvls:
      return "nvls";
  }
  return "?";
}

double CollectiveResult::algorithm_bandwidth() const {
  const double s = seconds();
  return s > 0 ? static_cast<double>(tensor.count) / s : 0;
}

double CollectiveResult::bus_bandwidth() const {
  return algorithm_bandwidth() * bus_factor(operation, ranks);
}

void validate(const CollectiveSpec& spec, std::size_t participants, const std::string& path) {
  const auto n = static_cast<std::int64_t>(participants);
  if (n < 1) throw InputError(path, "a collective needs at least one participant");
  if (n >= (std::int64_t{1} << 31)) throw InputError(path, "too many participants");
  if (spec.bytes.count < 0) throw InputError(path + ".bytes", "must not be negative");
  if (spec.chunks < 1) throw InputError(path + ".chunks", "must be at least 1");
  if (spec.channels < 1) throw InputError(path + ".channels", "must be at least 1");
  if (spec.window < 0) throw InputError(path + ".window", "must be 0 (unlimited) or more");
  if (spec.costs.launch < Time::zero())
    throw InputError(path + ".costs.launch", "must not be negative");
  for (Protocol p : kProtocols) {
    const ProtocolCost& c = spec.costs.of(p);
    // The path is only built for an error: a model may build a collective per gradient chunk.
    auto where = [&] { return path + ".costs.protocols." + std::string(to_string(p)); };
    if (c.hop_latency < Time::zero())
      throw InputError(where() + ".hop_latency", "must not be negative");
    if (!(c.efficiency > 0 && c.efficiency <= 1))
      throw InputError(where() + ".efficiency", "must be in (0, 1]");
  }
  if (spec.host.message_overhead < Time::zero())
    throw InputError(path + ".host.message_overhead", "must not be negative");
  if (spec.host.message_latency < Time::zero())
    throw InputError(path + ".host.message_latency", "must not be negative");
  if (spec.host.ps_aggregation.bytes_per_s < 0)
    throw InputError(path + ".host.ps_aggregation", "must not be negative");
  if (spec.algorithm_by_size && spec.operation != Operation::kAllReduce)
    throw InputError(path + ".algorithm", "auto (chosen by size) is for all_reduce only, not " +
                                              std::string(to_string(spec.operation)));
  const auto allowed = algorithms_for(spec.operation);
  if (std::find(allowed.begin(), allowed.end(), spec.algorithm) == allowed.end()) {
    std::string names;
    for (Algorithm a : allowed) names += (names.empty() ? "" : ", ") + std::string(to_string(a));
    throw InputError(path + ".algorithm", std::string(to_string(spec.operation)) + " runs by " +
                                              names + ", not " +
                                              std::string(to_string(spec.algorithm)));
  }
  if (spec.operation == Operation::kSendRecv && n != 2)
    throw InputError(path, "send_recv needs exactly two participants, not " + std::to_string(n));
  if (spec.algorithm == Algorithm::kParameterServer) {
    if (spec.servers < 1) throw InputError(path + ".servers", "must be at least 1");
    if (spec.element_bytes < 1 || spec.bytes.count % spec.element_bytes != 0)
      throw InputError(path + ".element_bytes", "must be at least 1 and divide the bytes");
    if (spec.placement == Placement::kDedicated && spec.servers >= n)
      throw InputError(path + ".servers",
                       "dedicated servers must leave at least one worker among the " +
                           std::to_string(n) + " participants");
    if (spec.placement != Placement::kDedicated && spec.servers > n)
      throw InputError(path + ".servers", "colocated servers cannot outnumber the " +
                                              std::to_string(n) + " participants");
  }
  if (spec.algorithm == Algorithm::kTree && spec.arity < 1)
    throw InputError(path + ".arity", "must be at least 1");
}

Collective::Collective(Engine& engine, Network& network, std::vector<NodeId> participants,
                       const CollectiveSpec& spec, DoneCallback on_done,
                       const LinkConditions* links)
    : engine_(engine),
      spec_(spec),
      participants_(std::move(participants)),
      links_(links),
      on_done_(std::move(on_done)) {
  validate(spec_, participants_.size(), "collective");
  MLSIM_CHECK(!spec_.algorithm_by_size || links != nullptr,
              "choosing an algorithm by size needs the link conditions");
  if (spec_.costs.has_protocols()) {
    int enabled = 0;
    for (Protocol p : kProtocols) enabled += spec_.costs.of(p).enabled ? 1 : 0;
    choose_by_links_ = enabled > 1;
    MLSIM_CHECK(!choose_by_links_ || links != nullptr,
                "choosing a protocol needs the link conditions");
  }
  const ProtocolCost protocol = choose();
  // nvls sends to and from the switch, an extra sender (index n) outside the ranks.
  std::vector<NodeId> nodes = participants_;
  if (spec_.algorithm == Algorithm::kNvls) {
    MLSIM_CHECK(links != nullptr, "nvls needs the link conditions to find its switch");
    const std::optional<NodeId> sw = shared_switch(links->topology(), participants_);
    MLSIM_CHECK(sw.has_value(), "nvls needs every participant on one switch");
    nodes.push_back(*sw);
  }
  sender_ = std::make_unique<Sender>(engine, network, std::move(nodes), spec_.window,
                                     spec_.flow_label, protocol, spec_.host,
                                     static_cast<std::uint32_t>(participants_.size()));
  // auto: the algorithm is chosen when the collective starts, from the links as they are then.
  if (!spec_.algorithm_by_size) build_algorithm();
}

void Collective::build_algorithm() {
  const LinkConditions* links = links_;
  const auto n = static_cast<std::uint32_t>(participants_.size());
  switch (spec_.algorithm) {
    case Algorithm::kRing:
      algorithm_ = make_ring(*this, *sender_, participants_, spec_, links);
      break;
    case Algorithm::kParameterServer:
      algorithm_ = make_parameter_server(*this, *sender_, n, spec_);
      break;
    case Algorithm::kTree:
      algorithm_ = make_tree(*this, *sender_, n, spec_);
      break;
    case Algorithm::kRat:
      MLSIM_CHECK(links != nullptr, "rat needs the link conditions to plan with");
      algorithm_ = make_rat(*this, *sender_, participants_, spec_, *links);
      break;
    case Algorithm::kDirect:
      algorithm_ = make_direct(*this, *sender_, n, spec_);
      break;
    case Algorithm::kNvls:
      algorithm_ = make_nvls(*this, *sender_, n, spec_);
      break;
  }
  sender_->set_sink(algorithm_.get());
}

// The sender's destructor cancels what is in flight; nothing runs while the algorithm and the
// sender are being destroyed, and nothing they handed out runs afterwards.
Collective::~Collective() = default;

void Collective::set_failure_callback(FailureCallback cb) {
  on_failure_ = std::move(cb);
  sender_->set_on_failed([this] {
    if (failure_reported_ || cancelled_) return;
    failure_reported_ = true;
    if (on_failure_) on_failure_(result());
  });
}

void Collective::cancel() {
  cancelled_ = true;
  sender_->cancel();
}

ProtocolCost Collective::choose() {
  if (!spec_.costs.has_protocols()) return {};  // no protocol costs
  const Bandwidth narrowest =
      choose_by_links_ ? ring_bottleneck(*links_, participants_, spec_.flow_label) : Bandwidth{};
  protocol_ =
      choose_protocol(spec_.costs, spec_.operation, spec_.algorithm,
                      static_cast<int>(participants_.size()), spec_.arity, spec_.bytes, narrowest);
  return spec_.costs.of(*protocol_);
}

void Collective::choose_algorithm_by_size() {
  const RingRoutes routes = ring_routes(*links_, participants_, spec_.flow_label);
  static constexpr std::array kBySize = {Algorithm::kRing, Algorithm::kTree};
  // Without a route there is nothing to compare: the ring, whose transfers then fail.
  spec_.algorithm = routes.narrowest.bytes_per_s > 0
                        ? choose_algorithm(spec_.costs, spec_.operation, kBySize,
                                           static_cast<int>(participants_.size()), spec_.arity,
                                           spec_.bytes, routes.narrowest, routes.longest_latency)
                              .algorithm
                        : Algorithm::kRing;
}

void Collective::begin() {
  MLSIM_CHECK(!begun_, "a collective started twice");
  MLSIM_CHECK(!cancelled_, "a cancelled collective started again");
  begun_ = true;
  if (spec_.algorithm_by_size && !algorithm_) {
    choose_algorithm_by_size();
    build_algorithm();
  }
  // The links may have changed since the collective was built (a model builds it at prepare
  // time, before the events at "0s" apply): choose the protocol from the links as they are now.
  if (choose_by_links_) sender_->set_protocol(choose());
  started_ = engine_.now();
}

void Collective::start() {
  begin();
  if (spec_.costs.launch > Time::zero()) {
    sender_->defer(engine_.now() + spec_.costs.launch, [this] { algorithm_->start(); });
  } else {
    algorithm_->start();
  }
}

bool Collective::rearm() {
  MLSIM_CHECK(!cancelled_, "a cancelled collective cannot be rearmed");
  MLSIM_CHECK(done_, "only a finished collective can be rearmed");
  if (spec_.algorithm_by_size || !algorithm_->rearm()) return false;
  done_ = false;
  begun_ = false;
  return true;
}

bool Collective::supports_join() const {
  return !spec_.algorithm_by_size && algorithm_->supports_join();
}

void Collective::join(std::uint32_t participant) {
  MLSIM_CHECK(supports_join(), std::string(to_string(spec_.algorithm)) +
                                   " has no staggered entry: start it with start()");
  if (!begun_) begin();
  if (spec_.costs.launch > Time::zero()) {
    sender_->defer(engine_.now() + spec_.costs.launch,
                   [this, participant] { algorithm_->join(participant); });
  } else {
    algorithm_->join(participant);
  }
}

void Collective::finish() {
  MLSIM_CHECK(!done_, "collective finished twice");
  done_ = true;
  finished_ = engine_.now();
  if (on_done_) on_done_(result());
}

CollectiveResult Collective::result() const {
  CollectiveResult r;
  r.started = started_;
  r.finished = done_ ? finished_ : engine_.now();
  r.completed = done_;
  r.operation = spec_.operation;
  r.algorithm = spec_.algorithm;
  r.ranks = algorithm_ ? algorithm_->ranks() : static_cast<int>(participants_.size());
  r.tensor = spec_.bytes;
  r.bytes_sent = sender_->bytes_sent();
  r.bytes_delivered = sender_->bytes_delivered();
  r.bytes_cancelled = sender_->bytes_cancelled();
  r.wire_bytes = sender_->wire_bytes();
  r.protocol = protocol_;
  r.transfers = sender_->transfers();
  r.failed_transfers = sender_->failed();
  if (algorithm_) r.verified_pieces = algorithm_->verified_pieces();
  return r;
}

double Collective::progress() const {
  return algorithm_ ? algorithm_->progress() : 0;
}

CollectiveResult run_collective(Engine& engine, Network& network, std::vector<NodeId> participants,
                                const CollectiveSpec& spec, const LinkConditions* links) {
  Collective collective(
      engine, network, std::move(participants), spec,
      [&engine](const CollectiveResult&) { engine.stop(); }, links);
  collective.start();
  engine.run();
  return collective.result();
}

}  // namespace mlsim::collectives
