#include "sim_core/hardware/dnn_profile.hpp"

#include <charconv>
#include <cmath>
#include <fstream>
#include <map>
#include <queue>
#include <string_view>

#include "sim_core/base/error.hpp"
#include "sim_core/base/input_file.hpp"

namespace mlsim {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

double parse_number(std::string_view text, const std::string& where, std::string_view field) {
  text = trim(text);
  double v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || !std::isfinite(v) || v < 0)
    throw InputError(where, std::string(field) + ": expected a non-negative number, got '" +
                                std::string(text) + "'");
  return v;
}

// "123.000" or "[1.0; 2.0]" (several outputs) -> bytes, summed.
Bytes parse_size(std::string_view text, const std::string& where, std::string_view field) {
  text = trim(text);
  double total = 0;
  if (!text.empty() && text.front() == '[') {
    if (text.back() != ']') throw InputError(where, std::string(field) + ": unterminated list");
    std::string_view items = text.substr(1, text.size() - 2);
    while (!items.empty()) {
      auto semi = items.find(';');
      total += parse_number(items.substr(0, semi), where, field);
      items = semi == std::string_view::npos ? std::string_view() : items.substr(semi + 1);
    }
  } else {
    total = parse_number(text, where, field);
  }
  return Bytes{static_cast<std::int64_t>(std::llround(total))};
}

struct Fields {
  double forward = -1, backward = -1;
  Bytes activation{-1}, parameters{-1};
};

// "forward_compute_time=F, backward_compute_time=B, activation_size=A, parameter_size=P".
// Commas inside "[...]" belong to the value (the lists use ';', but be safe).
Fields parse_fields(std::string_view text, const std::string& where) {
  Fields f;
  while (!text.empty()) {
    std::size_t end = 0;
    int depth = 0;
    for (; end < text.size(); ++end) {
      if (text[end] == '[') ++depth;
      if (text[end] == ']') --depth;
      if (text[end] == ',' && depth == 0) break;
    }
    std::string_view item = trim(text.substr(0, end));
    text = end < text.size() ? text.substr(end + 1) : std::string_view();
    auto eq = item.find('=');
    if (eq == std::string_view::npos)
      throw InputError(where, "expected key=value, got '" + std::string(item) + "'");
    std::string_view key = trim(item.substr(0, eq)), value = item.substr(eq + 1);
    if (key == "forward_compute_time")
      f.forward = parse_number(value, where, key);
    else if (key == "backward_compute_time")
      f.backward = parse_number(value, where, key);
    else if (key == "activation_size")
      f.activation = parse_size(value, where, key);
    else if (key == "parameter_size")
      f.parameters = parse_size(value, where, key);
    else
      throw InputError(where, "unknown field '" + std::string(key) + "'");
  }
  if (f.forward < 0 || f.backward < 0 || f.activation.count < 0 || f.parameters.count < 0)
    throw InputError(where,
                     "a layer needs forward_compute_time, backward_compute_time, "
                     "activation_size and parameter_size");
  return f;
}

bool is_input_description(std::string_view d) {
  if (d.substr(0, 5) != "Input") return false;
  for (char c : d.substr(5))
    if (c < '0' || c > '9') return false;
  return true;
}

}  // namespace

Bytes DnnProfile::total_parameters() const {
  Bytes b;
  for (const auto& l : layers) b += l.parameters;
  return b;
}

double DnnProfile::forward_ms(bool include_inputs) const {
  double t = 0;
  for (const auto& l : layers)
    if (include_inputs || !l.is_input) t += l.forward_ms;
  return t;
}

double DnnProfile::backward_ms(bool include_inputs) const {
  double t = 0;
  for (const auto& l : layers)
    if (include_inputs || !l.is_input) t += l.backward_ms;
  return t;
}

DnnProfile parse_pipedream_graph(std::istream& in, const std::string& source) {
  std::vector<LayerProfile> in_file_order;
  std::map<std::string, std::size_t, std::less<>> index;
  std::vector<std::pair<std::string, std::string>> named_edges;
  std::vector<std::string> edge_where;
  std::string line;
  int line_no = 0;
  constexpr std::string_view kSep = " -- ";
  while (std::getline(in, line)) {
    ++line_no;
    const std::string where = source + ":" + std::to_string(line_no);
    std::string_view text = line;
    bool is_edge = !text.empty() && text.front() == '\t';
    text = trim(text);
    if (text.empty()) continue;
    auto first = text.find(kSep);
    if (first == std::string_view::npos)
      throw InputError(where, "expected 'nodeN -- ...', got '" + std::string(text) + "'");
    if (is_edge) {
      named_edges.emplace_back(std::string(trim(text.substr(0, first))),
                               std::string(trim(text.substr(first + kSep.size()))));
      edge_where.push_back(where);
      continue;
    }
    auto last = text.rfind(kSep);
    if (last == first) throw InputError(where, "a layer line needs 'id -- description -- fields'");
    LayerProfile layer;
    layer.id = std::string(trim(text.substr(0, first)));
    layer.description =
        std::string(trim(text.substr(first + kSep.size(), last - first - kSep.size())));
    Fields f = parse_fields(text.substr(last + kSep.size()), where);
    layer.forward_ms = f.forward;
    layer.backward_ms = f.backward;
    layer.activation = f.activation;
    layer.parameters = f.parameters;
    layer.is_input = is_input_description(layer.description);
    if (!index.emplace(layer.id, in_file_order.size()).second)
      throw InputError(where, "layer '" + layer.id + "' defined twice");
    in_file_order.push_back(std::move(layer));
  }
  if (in_file_order.empty()) throw InputError(source, "no layers found");

  // Kahn's algorithm; among ready layers the earliest in the file goes first.
  const std::size_t n = in_file_order.size();
  std::vector<std::vector<std::size_t>> succ(n);
  std::vector<int> indegree(n, 0);
  std::vector<std::pair<std::size_t, std::size_t>> file_edges;
  for (std::size_t i = 0; i < named_edges.size(); ++i) {
    auto a = index.find(named_edges[i].first), b = index.find(named_edges[i].second);
    if (a == index.end() || b == index.end())
      throw InputError(edge_where[i], "edge names an undefined layer");
    succ[a->second].push_back(b->second);
    ++indegree[b->second];
    file_edges.emplace_back(a->second, b->second);
  }
  std::priority_queue<std::size_t, std::vector<std::size_t>, std::greater<>> ready;
  for (std::size_t i = 0; i < n; ++i)
    if (indegree[i] == 0) ready.push(i);
  std::vector<std::size_t> order, position(n);
  while (!ready.empty()) {
    std::size_t i = ready.top();
    ready.pop();
    position[i] = order.size();
    order.push_back(i);
    for (std::size_t s : succ[i])
      if (--indegree[s] == 0) ready.push(s);
  }
  if (order.size() != n) throw InputError(source, "the layer graph has a cycle");

  DnnProfile p;
  p.name = source;
  for (std::size_t i : order) p.layers.push_back(std::move(in_file_order[i]));
  for (auto [a, b] : file_edges) p.edges.emplace_back(position[a], position[b]);
  return p;
}

DnnProfile read_pipedream_graph(const std::filesystem::path& file) {
  std::ifstream in = open_input_file(file, "", "DNN profile");
  return parse_pipedream_graph(in, file.string());
}

DnnProfile read_pipedream_graph_field(JsonReader& section, std::string_view key,
                                      const std::filesystem::path& scenario_dir) {
  std::filesystem::path file = section.string(key);
  if (file.is_relative()) file = scenario_dir / file;
  try {
    return read_pipedream_graph(file);
  } catch (const InputError& e) {
    throw InputError(section.path_of(key), e.what());
  }
}

}  // namespace mlsim
