#include "sim_core/hardware/hardware.hpp"

#include <gtest/gtest.h>

#include <fstream>

#include "sim_core/base/error.hpp"
#include "sim_core/scenario/json_reader.hpp"

using namespace mlsim;

namespace {

nlohmann::json load(const std::string& rel) {
  std::ifstream in(std::string(MLSIM_SOURCE_DIR) + "/" + rel);
  EXPECT_TRUE(in) << rel;
  return nlohmann::json::parse(in);
}

HardwareCatalog catalog_of(nlohmann::json hw) {
  HardwareCatalog c;
  JsonReader r(hw, "hardware");
  c.add_from_json(r);
  return c;
}

// Runs the parser on `hw` and returns the InputError's path + message.
std::string error_of(nlohmann::json hw) {
  try {
    catalog_of(std::move(hw));
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

nlohmann::json minimal_gpu() {
  return {{"_source", "test"},
          {"peak", {{"fp16", "100TFLOPS"}}},
          {"hbm_bandwidth", "1TB/s"},
          {"hbm_capacity", "16GiB"}};
}

}  // namespace

TEST(Hardware, ShippedGpuCatalogParsesWithDatasheetFigures) {
  auto j = load("workloads/hardware/gpus.json");
  auto c = catalog_of(j["hardware"]);
  ASSERT_EQ(c.gpus().size(), 7u);
  const auto& a100 = c.gpu("A100-SXM4-80GB", "x");
  EXPECT_EQ(a100.peak_for(Dtype::kBf16, "x").flops_per_s, 312e12);
  EXPECT_EQ(a100.peak_for(Dtype::kTf32, "x").flops_per_s, 156e12);
  EXPECT_EQ(a100.hbm_capacity.count, 80LL << 30);
  EXPECT_EQ(a100.hbm_bandwidth.bytes_per_s, 2039e9);
  EXPECT_FALSE(a100.supports(Dtype::kFp8));
  EXPECT_THROW(a100.peak_for(Dtype::kFp8, "system.dtype"), InputError);
  const auto& v100 = c.gpu("V100-SXM2-32GB", "x");
  EXPECT_FALSE(v100.supports(Dtype::kBf16));
  EXPECT_EQ(v100.nvlink_bandwidth->bytes_per_s, 300e9);
  // The 16 GB SXM2 part (PipeDream's Cluster-B) differs from the 32 GB one only in memory.
  const auto& v100_16 = c.gpu("V100-SXM2-16GB", "x");
  EXPECT_EQ(v100_16.hbm_capacity.count, 16LL << 30);
  EXPECT_EQ(v100_16.peak_for(Dtype::kFp32, "x").flops_per_s,
            v100.peak_for(Dtype::kFp32, "x").flops_per_s);
  EXPECT_EQ(v100_16.hbm_bandwidth.bytes_per_s, v100.hbm_bandwidth.bytes_per_s);
  const auto& v100_pcie = c.gpu("V100-PCIE-32GB", "x");
  EXPECT_EQ(v100_pcie.peak_for(Dtype::kFp32, "x").flops_per_s, 14e12);
  EXPECT_FALSE(v100_pcie.nvlink_bandwidth);  // PCIe only
  const auto& h100 = c.gpu("H100-SXM5-80GB", "x");
  EXPECT_EQ(h100.peak_for(Dtype::kFp8, "x").flops_per_s, 1979e12);
  EXPECT_EQ(h100.hbm_bandwidth.bytes_per_s, 3.35e12);
  EXPECT_EQ(c.gpu("H200-SXM-141GB", "x").hbm_capacity.count, 141LL << 30);
  EXPECT_NE(c.gpu("A100-SXM4-40GB", "x").source.find("datasheet"), std::string::npos);
  for (const auto& [name, g] : c.gpus()) {
    EXPECT_FALSE(g.source.empty()) << name;
    // Dense tensor-core half precision is never below fp32 on these parts.
    EXPECT_GE(g.peak_for(Dtype::kFp16, name).flops_per_s,
              g.peak_for(Dtype::kFp32, name).flops_per_s);
  }
}

TEST(Hardware, ShippedSwitchCatalogParses) {
  auto j = load("workloads/hardware/switches.json");
  auto c = catalog_of(j["hardware"]);
  const auto& plain = c.switch_spec("tofino-32x100g", "x");
  EXPECT_EQ(plain.ports, 32);
  EXPECT_EQ(plain.port_bandwidth.bytes_per_s, 12.5e9);
  EXPECT_FALSE(plain.aggregators.has_value());
  const auto& atp = c.switch_spec("tofino-32x100g-atp", "x");
  ASSERT_TRUE(atp.aggregators.has_value());
  EXPECT_EQ(atp.aggregators->count, 20000);
  EXPECT_EQ(atp.aggregators->bytes_per_slot.count, 248);
  EXPECT_EQ(c.switch_spec("tofino-32x100g-switchml", "x").aggregators->count, 8192);
}

TEST(Hardware, UnknownNameListsTheCatalog) {
  auto c = catalog_of({{"gpus", {{"G1", minimal_gpu()}}}});
  try {
    c.gpu("G2", "system.gpu");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), "system.gpu");
    EXPECT_NE(std::string(e.what()).find("\"G1\""), std::string::npos);
  }
}

TEST(Hardware, StrictParsingNamesThePath) {
  auto with = [](const char* key, nlohmann::json value) {
    auto g = minimal_gpu();
    if (value.is_null())
      g.erase(key);
    else
      g[key] = value;
    return nlohmann::json{{"gpus", {{"G", g}}}};
  };
  EXPECT_NE(
      error_of(with("hbm_bandwidht", "1TB/s")).find("hardware.gpus.G.hbm_bandwidht: unknown key"),
      std::string::npos);
  EXPECT_NE(error_of(with("_source", nullptr)).find("hardware.gpus.G._source: missing"),
            std::string::npos);
  EXPECT_NE(error_of(with("hbm_capacity", "0GiB")).find("hardware.gpus.G.hbm_capacity: a memory"),
            std::string::npos);
  EXPECT_NE(error_of(with("hbm_bandwidth", "-1TB/s")).find("hardware.gpus.G.hbm_bandwidth"),
            std::string::npos);
  EXPECT_NE(error_of(with("peak", nlohmann::json::object()))
                .find("hardware.gpus.G.peak: expected at least one"),
            std::string::npos);
  EXPECT_NE(
      error_of(with("peak", {{"int4", "1TFLOPS"}})).find("hardware.gpus.G.peak.int4: unknown key"),
      std::string::npos);
  EXPECT_NE(error_of({{"gpus", {{"bad name", minimal_gpu()}}}}).find("may contain only"),
            std::string::npos);
  EXPECT_NE(error_of({{"gpus", 3}}).find("hardware.gpus: expected an object"), std::string::npos);
  EXPECT_NE(error_of({{"gpu", nlohmann::json::object()}}).find("hardware.gpu: unknown key"),
            std::string::npos);
  nlohmann::json sw = {
      {"_source", "t"}, {"ports", 0}, {"port_bandwidth", "100Gbps"}, {"pipeline_latency", "1us"}};
  EXPECT_NE(error_of({{"switches", {{"S", sw}}}})
                .find("hardware.switches.S.ports: expected an integer in [1,"),
            std::string::npos);
  sw["ports"] = 4;
  sw["aggregators"] = {{"_source", "t"}, {"count", 10}, {"bytes_per_slot", "0B"}};
  EXPECT_NE(
      error_of({{"switches", {{"S", sw}}}}).find("hardware.switches.S.aggregators.bytes_per_slot"),
      std::string::npos);
}

TEST(Hardware, DtypeNamesRoundTrip) {
  for (Dtype d : kAllDtypes) EXPECT_EQ(parse_dtype(dtype_name(d), "x"), d);
  EXPECT_THROW(parse_dtype("fp4", "system.dtype"), InputError);
}
