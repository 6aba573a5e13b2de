#pragma once
// MLCommons Chakra execution traces (the format ASTRA-sim reads) as an execution-graph source
// (sim_core/workload/execution_graph.hpp). One file per rank, `<prefix>.<rank>.et`: a
// varint-length-delimited GlobalMetadata message, then Node messages (Chakra's protolib
// encodeMessage). Nodes map to graph nodes as follows:
//
//   COMP_NODE       compute: a FixedWork of its duration_micros (0 when absent); its FLOPs
//                   (num_ops) are not priced: the trace's measured time is what runs
//   COMM_COLL_NODE  a collective: comm_type ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER or ALL_TO_ALL
//                   of comm_size bytes, over the communicator group its pg_name attribute names
//                   (ASTRA-sim's communicator-group file: {"<pg_name>": [ranks]}) or, without
//                   pg_name, over every rank
//   COMM_SEND_NODE  a message of comm_size bytes to comm_dst
//   COMM_RECV_NODE  a message of comm_size bytes from comm_src (matched in order per pair:
//                   comm_tag is not used)
//   other types     a compute node of no time (they only order their dependents)
// Dependencies: ctrl_deps and data_deps, both. Nodes run in a topological order of the file
// (ties in file order).
//
// Everything is read and checked when the source is built (prepare time): a missing file, a
// malformed message, an unknown dependency or a cycle, an unsupported collective, a group that
// does not hold the rank, sends and receives of a pair that disagree in number or size, group
// members whose collectives differ: InputError naming the file (and node). The whole trace is
// held in memory (compactly, as graph nodes); streaming a trace larger than memory is left.
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sim_core/workload/execution_graph.hpp"

namespace mlsim::workload {

struct ChakraTraceSpec {
  std::filesystem::path prefix;  // files prefix.<rank>.et
  RankId ranks = 0;
  std::map<std::string, std::vector<RankId>> groups;  // communicator groups by pg_name
  std::string where;                                  // JSON path for errors
};

// Reads ASTRA-sim's communicator-group file: {"<pg_name>": [rank, ...], ...}.
std::map<std::string, std::vector<RankId>> read_chakra_groups(const std::filesystem::path& file,
                                                              const std::string& where);

class ChakraSource final : public GraphSource {
 public:
  static constexpr std::uint8_t kCompute = 0, kCollective = 1, kPointToPoint = 2;

  explicit ChakraSource(const ChakraTraceSpec& spec);

  RankId ranks() const override { return ranks_; }
  std::int64_t first_gpu(RankId r) const override { return r; }
  int width(RankId) const override { return 1; }
  const std::vector<Group>& groups() const override { return groups_; }
  const std::vector<std::vector<Work>>& kernels() const override { return kernels_; }
  const std::vector<std::string>& phases() const override { return phases_; }
  bool next(RankId r, std::vector<Node>& out) override;
  double expected_nodes() const override { return expected_nodes_; }

 private:
  std::vector<std::vector<Node>> programs_;  // per rank, in execution order, until emitted
  std::vector<Group> groups_;
  std::vector<std::vector<Work>> kernels_;
  std::vector<std::string> phases_ = {"compute", "collective", "p2p"};
  double expected_nodes_ = 0;
  RankId ranks_ = 0;
};

}  // namespace mlsim::workload
