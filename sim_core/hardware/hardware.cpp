#include "sim_core/hardware/hardware.hpp"

#include <fmt/format.h>
#include <cctype>

#include "sim_core/base/error.hpp"
#include "sim_core/scenario/json_reader.hpp"

namespace mlsim {

std::string_view dtype_name(Dtype d) {
  switch (d) {
    case Dtype::kFp32:
      return "fp32";
    case Dtype::kTf32:
      return "tf32";
    case Dtype::kFp16:
      return "fp16";
    case Dtype::kBf16:
      return "bf16";
    case Dtype::kFp8:
      return "fp8";
  }
  MLSIM_CHECK(false, "unknown dtype");
}

Dtype parse_dtype(std::string_view name, const std::string& where) {
  std::string known;
  for (Dtype d : kAllDtypes) {
    if (dtype_name(d) == name) return d;
    known += (known.empty() ? "\"" : ", \"") + std::string(dtype_name(d)) + "\"";
  }
  throw InputError(where, fmt::format("expected one of {}, got \"{}\"", known, name));
}

std::string_view intra_node_fabric_name(IntraNodeFabric f) {
  switch (f) {
    case IntraNodeFabric::kNvSwitch:
      return "nvswitch";
    case IntraNodeFabric::kNvLink:
      return "nvlink";
    case IntraNodeFabric::kPcie:
      return "pcie";
  }
  MLSIM_CHECK(false, "unknown intra-node fabric");
}

IntraNodeFabric parse_intra_node_fabric(std::string_view name, const std::string& where) {
  for (auto f : {IntraNodeFabric::kNvSwitch, IntraNodeFabric::kNvLink, IntraNodeFabric::kPcie})
    if (intra_node_fabric_name(f) == name) return f;
  throw InputError(where, fmt::format("expected one of \"nvswitch\", \"nvlink\", \"pcie\", got "
                                      "\"{}\"",
                                      name));
}

FlopRate GpuSpec::peak_for(Dtype d, const std::string& where) const {
  auto it = peak.find(d);
  if (it == peak.end())
    throw InputError(where,
                     fmt::format("GPU \"{}\" has no {} rate in the catalog", name, dtype_name(d)));
  return it->second;
}

namespace {

// Catalog names become part of JSON paths and CLI listings: keep them plain.
void check_entry_name(const std::string& name, const std::string& where) {
  if (name.empty()) throw InputError(where, "expected a non-empty name");
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'))
      throw InputError(where, fmt::format("name \"{}\" may contain only letters, digits, '-', "
                                          "'_' and '.'",
                                          name));
}

std::string required_source(JsonReader& r) {
  if (!r.has("_source"))
    throw InputError(r.path_of("_source"),
                     "missing (required: every catalog entry names where its figures come from)");
  auto s = r.string("_source");
  if (s.empty()) throw InputError(r.path_of("_source"), "expected a non-empty source");
  return s;
}

template <typename F>
void for_each_entry(JsonReader& section, std::string_view key, F parse_one) {
  if (!section.has(key)) {
    section.ignore(key);
    return;
  }
  auto& obj = section.raw(key);
  const std::string path = section.path_of(key);
  if (!obj.is_object())
    throw InputError(path, "expected an object of named entries, got " + json_type_name(obj));
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (!it.key().empty() && it.key()[0] == '_') continue;  // annotations
    if (it.key() == "comment") continue;
    const std::string entry_path = path + "." + it.key();
    check_entry_name(it.key(), entry_path);
    JsonReader entry(it.value(), entry_path);
    parse_one(entry, it.key());
  }
}

}  // namespace

GpuSpec parse_gpu_spec(JsonReader& r, const std::string& name) {
  GpuSpec g;
  g.name = name;
  g.source = required_source(r);
  auto peak = r.object("peak");
  for (Dtype d : kAllDtypes) {
    const auto key = dtype_name(d);
    if (peak.has(key)) g.peak[d] = peak.flop_rate(key);
  }
  peak.finish();
  if (g.peak.empty())
    throw InputError(peak.path(),
                     "expected at least one of \"fp32\", \"tf32\", \"fp16\", "
                     "\"bf16\", \"fp8\"");
  g.hbm_bandwidth = r.bandwidth("hbm_bandwidth");
  g.hbm_capacity = r.bytes("hbm_capacity");
  if (g.hbm_capacity.count <= 0)
    throw InputError(r.path_of("hbm_capacity"), "a memory capacity must be greater than zero");
  if (r.has("nvlink_bandwidth"))
    g.nvlink_bandwidth = r.bandwidth("nvlink_bandwidth");
  else
    r.ignore("nvlink_bandwidth");
  if (auto intra = r.optional_object("intra_node")) {
    IntraNodeLink link;
    link.source = required_source(*intra);
    link.fabric = parse_intra_node_fabric(intra->string("fabric"), intra->path_of("fabric"));
    link.bandwidth = intra->bandwidth("bandwidth");
    link.latency = intra->duration("latency");
    intra->finish();
    g.intra_node = std::move(link);
  }
  r.finish();
  return g;
}

NicSpec parse_nic_spec(JsonReader& r, const std::string& name) {
  NicSpec n;
  n.name = name;
  n.source = required_source(r);
  n.bandwidth = r.bandwidth("bandwidth");
  n.ports = static_cast<int>(r.integer_or("ports", 1, 1, 64));
  r.finish();
  return n;
}

SwitchSpec parse_switch_spec(JsonReader& r, const std::string& name) {
  SwitchSpec s;
  s.name = name;
  s.source = required_source(r);
  s.ports = static_cast<int>(r.integer("ports", 1, 1 << 16));
  s.port_bandwidth = r.bandwidth("port_bandwidth");
  s.pipeline_latency = r.duration("pipeline_latency");
  if (auto agg = r.optional_object("aggregators")) {
    AggregatorPool pool;
    pool.source = required_source(*agg);
    pool.count = agg->integer("count", 1, std::int64_t{1} << 32);
    pool.bytes_per_slot = agg->bytes("bytes_per_slot");
    if (pool.bytes_per_slot.count <= 0)
      throw InputError(agg->path_of("bytes_per_slot"), "a slot size must be greater than zero");
    agg->finish();
    s.aggregators = std::move(pool);
  }
  r.finish();
  return s;
}

void HardwareCatalog::add_from_json(JsonReader& hw) {
  for_each_entry(hw, "gpus", [&](JsonReader& e, const std::string& name) {
    if (find_gpu(name)) throw InputError(e.path(), "GPU defined twice");
    add_gpu(parse_gpu_spec(e, name));
  });
  for_each_entry(hw, "nics", [&](JsonReader& e, const std::string& name) {
    if (find_nic(name)) throw InputError(e.path(), "NIC defined twice");
    add_nic(parse_nic_spec(e, name));
  });
  for_each_entry(hw, "engines", [&](JsonReader& e, const std::string& name) {
    if (find_engine(name)) throw InputError(e.path(), "serving engine defined twice");
    ServingEngineSpec s;
    s.name = name;
    s.source = required_source(e);
    s.iteration_overhead = e.duration("iteration_overhead");
    e.finish();
    add_engine(std::move(s));
  });
  for_each_entry(hw, "switches", [&](JsonReader& e, const std::string& name) {
    if (find_switch(name)) throw InputError(e.path(), "switch defined twice");
    add_switch(parse_switch_spec(e, name));
  });
  hw.finish();
}

void HardwareCatalog::add_gpu(GpuSpec gpu) {
  auto name = gpu.name;
  MLSIM_CHECK(gpus_.emplace(std::move(name), std::move(gpu)).second, "GPU added twice");
}

void HardwareCatalog::add_switch(SwitchSpec sw) {
  auto name = sw.name;
  MLSIM_CHECK(switches_.emplace(std::move(name), std::move(sw)).second, "switch added twice");
}

void HardwareCatalog::add_nic(NicSpec nic) {
  auto name = nic.name;
  MLSIM_CHECK(nics_.emplace(std::move(name), std::move(nic)).second, "NIC added twice");
}

void HardwareCatalog::add_engine(ServingEngineSpec engine) {
  auto name = engine.name;
  MLSIM_CHECK(engines_.emplace(std::move(name), std::move(engine)).second, "engine added twice");
}

const ServingEngineSpec* HardwareCatalog::find_engine(std::string_view name) const {
  auto it = engines_.find(name);
  return it == engines_.end() ? nullptr : &it->second;
}

const NicSpec* HardwareCatalog::find_nic(std::string_view name) const {
  auto it = nics_.find(name);
  return it == nics_.end() ? nullptr : &it->second;
}

const GpuSpec* HardwareCatalog::find_gpu(std::string_view name) const {
  auto it = gpus_.find(name);
  return it == gpus_.end() ? nullptr : &it->second;
}

const SwitchSpec* HardwareCatalog::find_switch(std::string_view name) const {
  auto it = switches_.find(name);
  return it == switches_.end() ? nullptr : &it->second;
}

namespace {
template <typename Map>
std::string known_names(const Map& m) {
  std::string out;
  for (const auto& [k, v] : m) out += (out.empty() ? "\"" : ", \"") + k + "\"";
  return out.empty() ? "none (include a catalog from workloads/hardware/)" : out;
}
}  // namespace

const GpuSpec& HardwareCatalog::gpu(std::string_view name, const std::string& where) const {
  if (const auto* g = find_gpu(name)) return *g;
  throw InputError(where,
                   fmt::format("unknown GPU \"{}\" (catalog has: {})", name, known_names(gpus_)));
}

const SwitchSpec& HardwareCatalog::switch_spec(std::string_view name,
                                               const std::string& where) const {
  if (const auto* s = find_switch(name)) return *s;
  throw InputError(
      where, fmt::format("unknown switch \"{}\" (catalog has: {})", name, known_names(switches_)));
}

const NicSpec& HardwareCatalog::nic(std::string_view name, const std::string& where) const {
  if (const auto* n = find_nic(name)) return *n;
  throw InputError(where,
                   fmt::format("unknown NIC \"{}\" (catalog has: {})", name, known_names(nics_)));
}

const ServingEngineSpec& HardwareCatalog::engine(std::string_view name,
                                                 const std::string& where) const {
  if (const auto* e = find_engine(name)) return *e;
  throw InputError(where, fmt::format("unknown serving engine \"{}\" (catalog has: {})", name,
                                      known_names(engines_)));
}

}  // namespace mlsim
