#pragma once
// The hardware catalog: GPU and switch specifications a scenario can name.
//
// Entries come from the scenario's "hardware" section, normally filled by including the shipped
// catalogs (workloads/hardware/gpus.json, switches.json). Every entry must carry a "_source"
// naming where its figures come from (datasheet, paper, code), so no calibrated number is
// anonymous. Parsing is strict (JsonReader): unknown keys and impossible values are InputErrors.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim_core/base/time.hpp"
#include "sim_core/base/units.hpp"

namespace mlsim {

class JsonReader;

// Numeric formats a GPU's peak rate is quoted for. Tensor-core rates are used where the GPU has
// tensor cores for the format (what ML kernels reach for), dense (no structured sparsity).
enum class Dtype { kFp32, kTf32, kFp16, kBf16, kFp8 };

inline constexpr Dtype kAllDtypes[] = {Dtype::kFp32, Dtype::kTf32, Dtype::kFp16, Dtype::kBf16,
                                       Dtype::kFp8};

std::string_view dtype_name(Dtype d);  // "fp32", "tf32", "fp16", "bf16", "fp8"
// Throws InputError at `where` listing the known names.
Dtype parse_dtype(std::string_view name, const std::string& where);

// The link between the GPUs of one host.
enum class IntraNodeFabric { kNvSwitch, kNvLink, kPcie };
std::string_view intra_node_fabric_name(IntraNodeFabric f);  // "nvswitch", "nvlink", "pcie"
IntraNodeFabric parse_intra_node_fabric(std::string_view name, const std::string& where);

struct IntraNodeLink {
  IntraNodeFabric fabric = IntraNodeFabric::kPcie;
  Bandwidth bandwidth;  // per GPU, per direction
  Time latency;
  std::string source;
};

struct GpuSpec {
  std::string name;
  std::map<Dtype, FlopRate> peak;  // only the formats the GPU supports
  Bandwidth hbm_bandwidth;
  Bytes hbm_capacity;
  // Total per GPU, both directions summed, as vendors quote it; absent for PCIe-only parts.
  std::optional<Bandwidth> nvlink_bandwidth;
  // How the GPUs of one host are joined (topology hosts with several GPUs use it).
  std::optional<IntraNodeLink> intra_node;
  std::string source;

  bool supports(Dtype d) const { return peak.count(d) != 0; }
  // Peak rate for `d`; InputError at `where` when the GPU has no such format.
  FlopRate peak_for(Dtype d, const std::string& where) const;
};

struct AggregatorPool {
  std::int64_t count = 0;  // aggregators (slots) in the switch's memory
  Bytes bytes_per_slot;    // payload one aggregator accumulates
  std::string source;
};

// A host's network interface: its line rate bounds the host's links.
struct NicSpec {
  std::string name;
  Bandwidth bandwidth;  // per port, per direction
  int ports = 1;
  std::string source;
};

// A serving engine's host-side cost per iteration (scheduling, input preparation, sampling,
// detokenisation): time on the CPU that no GPU speed scales.
struct ServingEngineSpec {
  std::string name;
  Time iteration_overhead;
  std::string source;
};

struct SwitchSpec {
  std::string name;
  int ports = 0;
  Bandwidth port_bandwidth;
  Time pipeline_latency;                      // per packet, ingress to egress
  std::optional<AggregatorPool> aggregators;  // for in-network aggregation
  std::string source;
};

class HardwareCatalog {
 public:
  // Reads a "hardware" section: {"gpus": {NAME: {...}}, "nics": {...}, "switches": {...},
  // "engines": {...}}; each optional.
  // Adds to what the catalog already holds; a name defined twice is an error.
  void add_from_json(JsonReader& hardware);

  void add_gpu(GpuSpec gpu);
  void add_switch(SwitchSpec sw);
  void add_nic(NicSpec nic);
  void add_engine(ServingEngineSpec engine);

  const GpuSpec* find_gpu(std::string_view name) const;
  const SwitchSpec* find_switch(std::string_view name) const;
  const NicSpec* find_nic(std::string_view name) const;
  const ServingEngineSpec* find_engine(std::string_view name) const;
  // InputError at `where` listing the known names when absent.
  const GpuSpec& gpu(std::string_view name, const std::string& where) const;
  const SwitchSpec& switch_spec(std::string_view name, const std::string& where) const;
  const NicSpec& nic(std::string_view name, const std::string& where) const;
  const ServingEngineSpec& engine(std::string_view name, const std::string& where) const;

  const std::map<std::string, GpuSpec, std::less<>>& gpus() const { return gpus_; }
  const std::map<std::string, SwitchSpec, std::less<>>& switches() const { return switches_; }
  const std::map<std::string, NicSpec, std::less<>>& nics() const { return nics_; }
  const std::map<std::string, ServingEngineSpec, std::less<>>& engines() const { return engines_; }

 private:
  std::map<std::string, GpuSpec, std::less<>> gpus_;
  std::map<std::string, SwitchSpec, std::less<>> switches_;
  std::map<std::string, NicSpec, std::less<>> nics_;
  std::map<std::string, ServingEngineSpec, std::less<>> engines_;
};

// Parses one entry (the object under "gpus"/"switches"); `name` is its key.
GpuSpec parse_gpu_spec(JsonReader& entry, const std::string& name);
SwitchSpec parse_switch_spec(JsonReader& entry, const std::string& name);
NicSpec parse_nic_spec(JsonReader& entry, const std::string& name);

}  // namespace mlsim
