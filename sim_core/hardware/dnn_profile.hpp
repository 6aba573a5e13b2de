#pragma once
// Per-layer DNN profiles, as PipeDream's profiler writes them (`graph.txt`), for every model that
// trains a real network (in-network aggregation, pipelines, communication scheduling).
//
// File format (msr-fiddle/pipedream profiler/*/profiles/*/graph.txt): one line per layer
//   nodeN -- Description -- forward_compute_time=F, backward_compute_time=B,
//            activation_size=A, parameter_size=P
// followed by tab-indented edges "\tnodeA -- nodeB". Times are milliseconds per minibatch, sizes
// bytes (fp32). A layer with several outputs writes its activation as "[a; b; c]"; the reader sums
// them. The minibatch size is not in the file.
//
// Layers are returned in a deterministic topological order of the edges (Kahn's algorithm, ties
// broken by the order lines appear in the file), so forward runs front to back and backward back
// to front.
#include <filesystem>
#include <istream>
#include <string>
#include <vector>

#include "sim_core/base/time.hpp"
#include "sim_core/base/units.hpp"
#include "sim_core/scenario/json_reader.hpp"

namespace mlsim {

struct LayerProfile {
  std::string id;           // "node12"
  std::string description;  // "Conv2d(128, 256, kernel_size=(3, 3), ...)"
  double forward_ms = 0;    // per minibatch
  double backward_ms = 0;
  Bytes activation;       // output activation (sum of outputs)
  Bytes parameters;       // weights = gradient size
  bool is_input = false;  // data-loading node (description "Input", "Input0", ...)
};

struct DnnProfile {
  std::string name;                                        // file or model name, for messages
  std::vector<LayerProfile> layers;                        // topological order
  std::vector<std::pair<std::size_t, std::size_t>> edges;  // indices into layers

  Bytes total_parameters() const;
  // Sum of forward (backward) times; `include_inputs` adds the data-loading nodes.
  double forward_ms(bool include_inputs = false) const;
  double backward_ms(bool include_inputs = false) const;
};

// Parses graph.txt text; malformed lines throw InputError("<source>:<line>", ...).
DnnProfile parse_pipedream_graph(std::istream& in, const std::string& source);
// Reads a file; a missing file is an InputError naming it.
DnnProfile read_pipedream_graph(const std::filesystem::path& file);

// The graph file named by `section.key`, relative paths resolved against the scenario's folder;
// a missing or malformed file is an InputError at that key's JSON path.
DnnProfile read_pipedream_graph_field(JsonReader& section, std::string_view key,
                                      const std::filesystem::path& scenario_dir);

}  // namespace mlsim
