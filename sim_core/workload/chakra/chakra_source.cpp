#include "sim_core/workload/chakra/chakra_source.hpp"

#include <fcntl.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/util/delimited_message_util.h>
#include <unistd.h>

#include <fmt/format.h>
#include <optional>
#include <queue>
#include <unordered_map>

#include "chakra_et.pb.h"
#include "sim_core/base/error.hpp"
#include "sim_core/base/input_file.hpp"
#include "sim_core/scenario/strict_json.hpp"

namespace mlsim::workload {

namespace {

using mlsim_chakra::AttributeProto;

std::optional<std::int64_t> integer_attr(const mlsim_chakra::Node& n, std::string_view name) {
  for (const AttributeProto& a : n.attr()) {
    if (a.name() != name) continue;
    switch (a.value_case()) {
      case AttributeProto::kInt32Val:
        return a.int32_val();
      case AttributeProto::kInt64Val:
        return a.int64_val();
      case AttributeProto::kUint32Val:
        return a.uint32_val();
      case AttributeProto::kUint64Val:
        return static_cast<std::int64_t>(a.uint64_val());
      case AttributeProto::kSint32Val:
        return a.sint32_val();
      case AttributeProto::kSint64Val:
        return a.sint64_val();
      case AttributeProto::kFixed32Val:
        return a.fixed32_val();
      case AttributeProto::kFixed64Val:
        return static_cast<std::int64_t>(a.fixed64_val());
      case AttributeProto::kSfixed32Val:
        return a.sfixed32_val();
      case AttributeProto::kSfixed64Val:
        return a.sfixed64_val();
      default:
        return std::nullopt;
    }
  }
  return std::nullopt;
}

std::optional<std::string> string_attr(const mlsim_chakra::Node& n, std::string_view name) {
  for (const AttributeProto& a : n.attr())
    if (a.name() == name && a.value_case() == AttributeProto::kStringVal) return a.string_val();
  return std::nullopt;
}

// What a rank's trace says, before groups and messages are checked across ranks.
struct RankTrace {
  std::vector<Node> nodes;                 // in execution order
  std::vector<std::string> collective_pg;  // per collective node, in order: its pg_name
  std::vector<std::string> names;          // per node, for errors
};

class Reader {
 public:
  Reader(const std::filesystem::path& file, std::string where)
      : file_(file), where_(std::move(where)) {
    fd_ = ::open(file.c_str(), O_RDONLY);
    if (fd_ < 0) fail("cannot open the trace file");
    stream_ = std::make_unique<google::protobuf::io::FileInputStream>(fd_);
  }
  ~Reader() {
    stream_.reset();
    if (fd_ >= 0) ::close(fd_);
  }
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  template <typename Message>
  bool read(Message& m) {
    bool clean_eof = false;
    if (!google::protobuf::util::ParseDelimitedFromZeroCopyStream(&m, stream_.get(), &clean_eof)) {
      if (clean_eof) return false;
      fail(fmt::format("message {} is malformed (Chakra's varint-delimited protobuf expected)",
                       count_));
    }
    ++count_;
    return true;
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(where_, fmt::format("{}: {}", file_.string(), what));
  }

 private:
  std::filesystem::path file_;
  std::string where_;
  int fd_ = -1;
  std::unique_ptr<google::protobuf::io::FileInputStream> stream_;
  std::size_t count_ = 0;
};

std::optional<collectives::Operation> operation_of(std::int64_t comm_type) {
  switch (comm_type) {
    case mlsim_chakra::ALL_REDUCE:
      return collectives::Operation::kAllReduce;
    case mlsim_chakra::ALL_GATHER:
      return collectives::Operation::kAllGather;
    case mlsim_chakra::REDUCE_SCATTER:
      return collectives::Operation::kReduceScatter;
    case mlsim_chakra::ALL_TO_ALL:
      return collectives::Operation::kAllToAll;
    default:
      return std::nullopt;
  }
}

}  // namespace

std::map<std::string, std::vector<RankId>> read_chakra_groups(const std::filesystem::path& file,
                                                              const std::string& where) {
  const nlohmann::json j =
      parse_strict_json(read_input_file(file, where, "Chakra group map"), file.string());
  if (!j.is_object())
    throw InputError(where,
                     fmt::format("{}: an object of group name -> ranks expected", file.string()));
  std::map<std::string, std::vector<RankId>> groups;
  for (const auto& [name, ranks] : j.items()) {
    if (!ranks.is_array() || ranks.empty())
      throw InputError(where, fmt::format("{}: group \"{}\" must list ranks", file.string(), name));
    for (const auto& r : ranks) {
      if (!r.is_number_integer() || r.get<std::int64_t>() < 0)
        throw InputError(where, fmt::format("{}: group \"{}\" lists a rank that is not a "
                                            "non-negative integer",
                                            file.string(), name));
      groups[name].push_back(static_cast<RankId>(r.get<std::int64_t>()));
    }
  }
  return groups;
}

ChakraSource::ChakraSource(const ChakraTraceSpec& spec) {
  // Group 0: every rank (collectives without pg_name); then the named groups, in name order.
  Group everyone;
  for (RankId r = 0; r < spec.ranks; ++r) everyone.members.push_back(r);
  groups_.push_back(std::move(everyone));
  std::map<std::string, GroupId> group_ids;
  for (const auto& [name, ranks] : spec.groups) {
    for (RankId r : ranks)
      if (r >= spec.ranks)
        throw InputError(spec.where, fmt::format("communicator group \"{}\" names rank {} of a "
                                                 "{}-rank trace",
                                                 name, r, spec.ranks));
    group_ids[name] = static_cast<GroupId>(groups_.size());
    groups_.push_back({ranks, 1});
  }
  std::map<std::int64_t, KernelId> kernel_of_duration;
  auto kernel = [&](std::int64_t micros) {
    auto [it, fresh] = kernel_of_duration.try_emplace(micros, 0);
    if (fresh) {
      it->second = static_cast<KernelId>(kernels_.size());
      kernels_.push_back({FixedWork{Time::us(micros)}});
    }
    return it->second;
  };

  std::vector<std::vector<std::pair<collectives::Operation, Bytes>>> collectives_of(
      groups_.size() * static_cast<std::size_t>(spec.ranks));
  std::map<std::pair<RankId, RankId>, std::vector<Bytes>> sends, recvs;
  for (RankId r = 0; r < spec.ranks; ++r) {
    const std::filesystem::path file = spec.prefix.string() + "." + std::to_string(r) + ".et";
    Reader reader(file, spec.where);
    mlsim_chakra::GlobalMetadata metadata;
    if (!reader.read(metadata)) reader.fail("empty: no GlobalMetadata message");
    std::vector<mlsim_chakra::Node> raw;
    for (mlsim_chakra::Node n; reader.read(n); n.Clear()) raw.push_back(n);
    // Topological order, ties in file order.
    std::unordered_map<std::uint64_t, std::size_t> position;
    for (std::size_t i = 0; i < raw.size(); ++i)
      if (!position.emplace(raw[i].id(), i).second)
        reader.fail(fmt::format("node id {} appears twice", raw[i].id()));
    std::vector<std::vector<std::size_t>> children(raw.size());
    std::vector<std::size_t> waiting(raw.size(), 0);
    for (std::size_t i = 0; i < raw.size(); ++i) {
      auto add = [&](std::uint64_t dep) {
        const auto p = position.find(dep);
        if (p == position.end())
          reader.fail(fmt::format("node {} (\"{}\") depends on node {}, which is not in the trace",
                                  raw[i].id(), raw[i].name(), dep));
        children[p->second].push_back(i);
        ++waiting[i];
      };
      for (std::uint64_t d : raw[i].ctrl_deps()) add(d);
      for (std::uint64_t d : raw[i].data_deps()) add(d);
    }
    std::priority_queue<std::size_t, std::vector<std::size_t>, std::greater<>> ready;
    for (std::size_t i = 0; i < raw.size(); ++i)
      if (waiting[i] == 0) ready.push(i);
    std::vector<NodeIndex> index_of(raw.size(), 0);
    std::vector<Node>& program = programs_.emplace_back();
    while (!ready.empty()) {
      const std::size_t i = ready.top();
      ready.pop();
      const mlsim_chakra::Node& n = raw[i];
      Node node;
      const auto fail_node = [&](const std::string& what) {
        reader.fail(fmt::format("node {} (\"{}\"): {}", n.id(), n.name(), what));
      };
      const auto size = [&] {
        const auto s = integer_attr(n, "comm_size");
        if (!s || *s < 0) fail_node("no non-negative comm_size attribute");
        return Bytes{*s};
      };
      switch (n.type()) {
        case mlsim_chakra::COMP_NODE:
          node.kind = NodeKind::kCompute;
          node.phase = kCompute;
          node.target = kernel(static_cast<std::int64_t>(n.duration_micros()));
          break;
        case mlsim_chakra::COMM_COLL_NODE: {
          const auto type = integer_attr(n, "comm_type");
          const auto op = type ? operation_of(*type) : std::nullopt;
          if (!op)
            fail_node("comm_type must be ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER or ALL_TO_ALL");
          node.kind = NodeKind::kCollective;
          node.phase = kCollective;
          node.operation = *op;
          node.bytes = size();
          GroupId g = 0;
          if (const auto pg = string_attr(n, "pg_name")) {
            const auto it = group_ids.find(*pg);
            if (it == group_ids.end())
              fail_node(fmt::format("pg_name \"{}\" is not in the communicator groups", *pg));
            g = it->second;
          }
          const auto& members = groups_[static_cast<std::size_t>(g)].members;
          if (std::find(members.begin(), members.end(), r) == members.end())
            fail_node("its communicator group does not hold this rank");
          node.target = g;
          collectives_of[static_cast<std::size_t>(g) * static_cast<std::size_t>(spec.ranks) +
                         static_cast<std::size_t>(r)]
              .emplace_back(node.operation, node.bytes);
          break;
        }
        case mlsim_chakra::COMM_SEND_NODE:
        case mlsim_chakra::COMM_RECV_NODE: {
          const bool send = n.type() == mlsim_chakra::COMM_SEND_NODE;
          const auto peer = integer_attr(n, send ? "comm_dst" : "comm_src");
          if (!peer || *peer < 0 || *peer >= spec.ranks || *peer == r)
            fail_node(fmt::format("{} must name another rank of the trace",
                                  send ? "comm_dst" : "comm_src"));
          node.kind = send ? NodeKind::kSend : NodeKind::kRecv;
          node.phase = kPointToPoint;
          node.target = static_cast<RankId>(*peer);
          node.bytes = size();
          if (send)
            sends[{r, node.target}].push_back(node.bytes);
          else
            recvs[{node.target, r}].push_back(node.bytes);
          break;
        }
        default:  // metadata, memory and other nodes only order their dependents
          node.kind = NodeKind::kCompute;
          node.phase = kCompute;
          node.target = kernel(0);
      }
      for (std::uint64_t d : n.ctrl_deps()) node.deps.push_back(index_of[position[d]]);
      for (std::uint64_t d : n.data_deps()) node.deps.push_back(index_of[position[d]]);
      index_of[i] = program.size();
      program.push_back(std::move(node));
      for (std::size_t c : children[i])
        if (--waiting[c] == 0) ready.push(c);
    }
    if (program.size() != raw.size()) reader.fail("its dependencies form a cycle");
    expected_nodes_ += static_cast<double>(program.size());
  }
  // Across ranks: each pair's sends and receives, each group's collectives, must agree.
  auto pair_name = [](const std::pair<RankId, RankId>& p) {
    return fmt::format("rank {} to rank {}", p.first, p.second);
  };
  for (const auto& [pair, sizes] : sends)
    if (recvs[pair] != sizes)
      throw InputError(spec.where, fmt::format("{}: {} sends, but the receiver posts {} receives "
                                               "or their sizes differ",
                                               pair_name(pair), sizes.size(), recvs[pair].size()));
  for (const auto& [pair, sizes] : recvs)
    if (sends[pair] != sizes)
      throw InputError(spec.where, fmt::format("{}: {} receives without matching sends",
                                               pair_name(pair), sizes.size()));
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    const auto& members = groups_[g].members;
    const auto& first = collectives_of[g * static_cast<std::size_t>(spec.ranks) +
                                       static_cast<std::size_t>(members.front())];
    for (RankId m : members)
      if (collectives_of[g * static_cast<std::size_t>(spec.ranks) + static_cast<std::size_t>(m)] !=
          first)
        throw InputError(spec.where, fmt::format("ranks {} and {} run different collectives on "
                                                 "communicator group {}",
                                                 members.front(), m, g));
  }
  ranks_ = spec.ranks;
}

bool ChakraSource::next(RankId r, std::vector<Node>& out) {
  // The whole program at once: a trace's nodes may need to run out of the order they are
  // emitted in (a send and a receive posted together), which a partial window could block.
  auto& program = programs_[static_cast<std::size_t>(r)];
  if (program.empty()) return false;
  for (Node& n : program) out.push_back(std::move(n));
  program = {};
  return true;
}

}  // namespace mlsim::workload
