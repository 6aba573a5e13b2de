// Cost providers: per-regime roofline, profile-table interpolation, scaling between GPUs. The
// expected values are computed by hand in the comments.
#include "sim_core/hardware/cost_model.hpp"

#include <gtest/gtest.h>

#include "gpu_fixtures.hpp"

#include <filesystem>
#include <fstream>
#include <random>

#include "sim_core/base/error.hpp"
#include "tests/support/temp_dir.hpp"

namespace mlsim {
namespace {

const OperatorShape kShape{4096, 32, 32, 11008, 1};

TEST(Roofline, PicksTheRegimeOfTheTokenCount) {
  const GpuSpec a = test::make_gpu("A", 312, 19.5, 2039);
  RooflineProvider p;
  p.add("A", "mlp_up_proj",
        {{64, false, 0.3, 0.8, 5e-6}, {1024, false, 0.7, 0.6, 5e-6}, {0, true, 0.75, 0.5, 0}});
  // 8 tokens: F = 1e9, B = 1.6e8 bytes. Regime 1: max(1e9 / (0.3 * 312e12), 1.6e8 / (0.8 *
  // 2039e9)) + 5e-6 = max(1.0684e-5, 9.8087e-5) + 5e-6 = 1.03087e-4 s.
  const OperatorWork decode{"mlp_up_proj", 1e9, 1.6e8, Dtype::kFp16, 8, kShape};
  EXPECT_NEAR(*p.operator_seconds(decode, a), 1.6e8 / (0.8 * 2039e9) + 5e-6, 1e-15);
  EXPECT_NEAR(*p.operator_seconds(decode, a), 1.03087e-4, 1e-9);
  // 4096 tokens, last regime: F = 3.7e11: max(3.7e11 / (0.75 * 312e12), 2e8 / (0.5 * 2039e9))
  // = max(1.58120e-3, 1.9617e-4) = 1.58120e-3 s.
  const OperatorWork prefill{"mlp_up_proj", 3.7e11, 2e8, Dtype::kFp16, 4096, kShape};
  EXPECT_NEAR(*p.operator_seconds(prefill, a), 3.7e11 / (0.75 * 312e12), 1e-15);
  // 64 is still the first regime, 65 the second.
  EXPECT_EQ(p.regime("A", "mlp_up_proj", 64)->flops_efficiency, 0.3);
  EXPECT_EQ(p.regime("A", "mlp_up_proj", 65)->flops_efficiency, 0.7);
  // Unknown operator or GPU: not priced here.
  p.add("A", "add", {{0, true, 1, 0.5, 2e-6, 64}});
  // An element-wise op on 8 tokens moving 1e6 bytes is priced as 64 tokens: 8e6 bytes,
  // 8e6 / (0.5 * 2039e9) + 2e-6 = 9.8464e-6 s; from 64 tokens on, as itself.
  EXPECT_NEAR(*p.operator_seconds({"add", 0, 1e6, Dtype::kFp16, 8, kShape}, a),
              8e6 / (0.5 * 2039e9) + 2e-6, 1e-18);
  EXPECT_NEAR(*p.operator_seconds({"add", 0, 8e6, Dtype::kFp16, 64, kShape}, a),
              8e6 / (0.5 * 2039e9) + 2e-6, 1e-18);
  EXPECT_NEAR(*p.operator_seconds({"add", 0, 16e6, Dtype::kFp16, 128, kShape}, a),
              16e6 / (0.5 * 2039e9) + 2e-6, 1e-18);
  EXPECT_FALSE(p.operator_seconds({"nope", 1, 1, Dtype::kFp16, 1, kShape}, a));
  EXPECT_FALSE(p.operator_seconds(decode, test::make_gpu("B", 1, 1, 1)));
}

TEST(ProfileTable, InterpolatesLinearlyBetweenMeasuredTokenCounts) {
  const GpuSpec a = test::make_gpu("A", 312, 19.5, 2039);
  ProfileTableProvider p;
  p.add_point("A", "add", kShape, 8, 10e-6);
  p.add_point("A", "add", kShape, 16, 18e-6);
  p.add_point("A", "add", kShape, 32, 20e-6);
  EXPECT_EQ(p.points(), 3u);
  auto at = [&](std::int64_t tokens, OperatorShape shape = kShape) {
    return p.operator_seconds({"add", 0, 0, Dtype::kFp16, tokens, shape}, a);
  };
  EXPECT_DOUBLE_EQ(*at(16), 18e-6);  // measured point
  // 12 tokens: halfway between 8 (10 us) and 16 (18 us) = 14 us.
  EXPECT_NEAR(*at(12), 14e-6, 1e-18);
  // 20 tokens: a quarter of the way from 16 (18 us) to 32 (20 us) = 18.5 us.
  EXPECT_NEAR(*at(20), 18.5e-6, 1e-18);
  // Outside the measured range or another shape: nothing (the next provider prices it).
  EXPECT_FALSE(at(4));
  EXPECT_FALSE(at(64));
  EXPECT_FALSE(at(12, OperatorShape{4096, 32, 32, 11008, 2}));
}

TEST(CostModel, FallsBackFromProfilesToRooflineAndScalesUncalibratedGpus) {
  const GpuSpec a = test::make_gpu("A", 312, 19.5, 2039), h = test::make_gpu("H", 989.5, 67, 3350);
  auto profiles = std::make_unique<ProfileTableProvider>();
  profiles->add_point("A", "gemm", kShape, 8, 50e-6);
  profiles->add_point("A", "gemm", kShape, 16, 60e-6);
  auto roofline = std::make_unique<RooflineProvider>();
  roofline->add("A", "gemm", {{0, true, 0.5, 0.5, 0}});
  CostModel m;
  m.add(std::move(profiles));
  m.add(std::move(roofline));
  const OperatorWork in_table{"gemm", 2e9, 4e8, Dtype::kFp16, 12, kShape};
  EXPECT_NEAR(m.operator_seconds(in_table, a), 55e-6, 1e-18);  // interpolated
  EXPECT_EQ(m.provenance(in_table, a), "profiles");
  // 4096 tokens is outside the table: roofline max(2e9 / (0.5 * 312e12), 4e8 / (0.5 * 2039e9))
  // = max(1.282e-5, 3.9235e-4) = 3.9235e-4 s.
  const OperatorWork outside{"gemm", 2e9, 4e8, Dtype::kFp16, 4096, kShape};
  EXPECT_NEAR(m.operator_seconds(outside, a), 4e8 / (0.5 * 2039e9), 1e-15);
  EXPECT_EQ(m.provenance(outside, a), "roofline");
  // H has neither: an InputError at prepare time until scale_from is set.
  EXPECT_THROW(m.check_operator("gemm", h, "x"), InputError);
  m.set_scale_from(&a);
  m.check_operator("gemm", h, "x");
  // Scaled by the ideal rooflines: on A max(2e9 / 312e12, 4e8 / 2039e9) = 1.9618e-4 (memory);
  // on H max(2e9 / 989.5e12, 4e8 / 3350e9) = 1.1940e-4. 3.9235e-4 * 1.1940e-4 / 1.9618e-4.
  const double expected = (4e8 / (0.5 * 2039e9)) * (4e8 / 3350e9) / (4e8 / 2039e9);
  EXPECT_NEAR(m.operator_seconds(outside, h), expected, 1e-15);
  EXPECT_NEAR(m.operator_seconds(outside, h), 4e8 / (0.5 * 3350e9), 1e-15);  // = 2.388e-4 s
  EXPECT_EQ(m.provenance(outside, h), "scaled from A");
}

// Operators resolved once (CostProvider::resolve, CostModel::bind) are priced exactly as by name:
// the same provider, the same arithmetic. By hand: the profile table's interpolation, the
// roofline's regime and its curves by sequence length, and scaling onto an uncalibrated GPU.
TEST(CostModel, BoundOperatorPricesAsByNameByHand) {
  const GpuSpec a = test::make_gpu("A", 312, 19.5, 2039), h = test::make_gpu("H", 989.5, 67, 3350);
  auto profiles = std::make_unique<ProfileTableProvider>();
  profiles->add_point("A", "gemm", kShape, 8, 50e-6);
  profiles->add_point("A", "gemm", kShape, 16, 60e-6);
  // Unknown operator or GPU: nothing to resolve.
  EXPECT_EQ(profiles->resolve(a, "attn"), kUnpricedOperator);
  EXPECT_EQ(profiles->resolve(h, "gemm"), kUnpricedOperator);
  const OperatorHandle gemm = profiles->resolve(a, "gemm");
  ASSERT_NE(gemm, kUnpricedOperator);
  // A point added after resolving is seen through the handle: 24 tokens, halfway from 16
  // (60 us) to 32 (80 us) = 70 us.
  profiles->add_point("A", "gemm", kShape, 32, 80e-6);
  const OperatorWork at24{"gemm", 2e9, 4e8, Dtype::kFp16, 24, kShape};
  EXPECT_NEAR(*profiles->resolved_seconds(gemm, at24, a), 70e-6, 1e-18);
  auto roofline = std::make_unique<RooflineProvider>();
  roofline->add("A", "gemm", {{0, true, 0.5, 0.5, 0}});
  roofline->add("A", "attn", {{0, true, 0.5, 0.5, 1e-6}});
  roofline->add_seq_len_efficiency("A", "attn", {{1000, 10000}, {0.2, 0.4}});
  CostModel m;
  m.add(std::move(profiles));
  m.add(std::move(roofline));
  m.set_scale_from(&a);
  const auto bound_gemm = m.bind("gemm", a), bound_attn = m.bind("attn", a),
             bound_attn_h = m.bind("attn", h);
  EXPECT_EQ(&bound_attn_h.gpu(), &h);
  EXPECT_NEAR(m.operator_seconds(bound_gemm, at24), 70e-6, 1e-18);
  // 4096 tokens, outside the table: the roofline, max(2e9 / (0.5 * 312e12), 4e8 / (0.5 *
  // 2039e9)) = 3.9235e-4 s (memory).
  const OperatorWork outside{"gemm", 2e9, 4e8, Dtype::kFp16, 4096, kShape};
  EXPECT_NEAR(m.operator_seconds(bound_gemm, outside), 4e8 / (0.5 * 2039e9), 1e-15);
  // Attention at seq_len 1000 takes the curve's 0.2: 6.24e10 / (0.2 * 312e12) = 1e-3 s, + 1 us.
  const OperatorWork attn{"attn", 6.24e10, 1e6, Dtype::kFp16, 1000, kShape, 1000};
  EXPECT_NEAR(m.operator_seconds(bound_attn, attn), 1e-3 + 1e-6, 1e-15);
  // On H, scaled from A by the ideal rooflines: 1.001e-3 * (6.24e10 / 989.5e12) / (6.24e10 /
  // 312e12).
  EXPECT_NEAR(m.operator_seconds(bound_attn_h, attn), 1.001e-3 * 312 / 989.5, 1e-15);
  // A binding made before a provider was added is refused (its handles would miss it).
  m.add(std::make_unique<RooflineProvider>());
  EXPECT_THROW(m.operator_seconds(bound_gemm, at24), InvariantError);
}

// Property: over random work (operators known and unknown to the table, token counts inside
// and outside it, shapes measured and not, sequence lengths, calibrated and scaled GPUs), the
// bound price equals the price by name bit for bit.
TEST(CostModel, BoundOperatorEqualsByNameOverRandomWork) {
  const GpuSpec a = test::make_gpu("A", 312, 19.5, 2039), h = test::make_gpu("H", 989.5, 67, 3350);
  const OperatorShape other{8192, 64, 8, 28672, 8};
  auto profiles = std::make_unique<ProfileTableProvider>();
  for (std::int64_t t : {1, 4, 16, 64, 256, 1024})
    profiles->add_point("A", "gemm", kShape, t, 1e-6 * static_cast<double>(t + 3));
  auto roofline = std::make_unique<RooflineProvider>();
  roofline->add("A", "gemm", {{64, false, 0.3, 0.8, 5e-6}, {0, true, 0.7, 0.6, 2e-6}});
  roofline->add("A", "add", {{0, true, 1, 0.5, 2e-6, 64}});
  roofline->add("A", "attn", {{0, true, 0.5, 0.5, 1e-6}});
  roofline->add_seq_len_efficiency("A", "attn", {{512, 2048, 16384}, {0.2, 0.5, 0.6}});
  roofline->add_seq_len_bandwidth_efficiency("A", "attn", {{256, 8192}, {0.5, 0.8}}, 1);
  roofline->add_seq_len_bandwidth_efficiency("A", "attn", {{256, 8192}, {0.6, 0.9}}, 8);
  CostModel m;
  m.add(std::move(profiles));
  m.add(std::move(roofline));
  m.set_scale_from(&a);
  std::mt19937_64 rng(15);
  const char* ops[] = {"gemm", "add", "attn"};
  for (int i = 0; i < 20000; ++i) {
    const char* op = ops[rng() % 3];
    const GpuSpec& gpu = rng() % 2 ? a : h;
    OperatorWork w{op,
                   static_cast<double>(rng() % 1'000'000'000),
                   static_cast<double>(rng() % 100'000'000),
                   Dtype::kFp16,
                   static_cast<std::int64_t>(rng() % 2048),
                   rng() % 2 ? kShape : other,
                   rng() % 3 ? static_cast<std::int64_t>(rng() % 20000) : 0};
    const auto bound = m.bind(op, gpu);
    const double by_name = m.operator_seconds(w, gpu), by_handle = m.operator_seconds(bound, w);
    ASSERT_EQ(by_name, by_handle) << op << " on " << gpu.name << " at " << w.tokens;
  }
}

TEST(CostModel, ProfiledTimeScalesItsMemoryBoundPartByBandwidthTheRestByPeak) {
  const GpuSpec v = test::make_gpu("V", 125, 15.7, 900), a = test::make_gpu("A", 312, 19.5, 2039);
  // 10 ms measured on V in fp32 moving 4.5 GB: 4.5e9 / 900e9 = 5 ms at peak bandwidth, so half
  // the time is memory-bound and scales by 900/2039, the other half by 15.7/19.5:
  // 10 ms * (0.5 * 0.441393 + 0.5 * 0.805128) = 6.23261 ms.
  const double t = scale_profiled_time(0.010, 4.5e9, Dtype::kFp32, v, a, "v", "a");
  EXPECT_NEAR(t, 0.010 * (0.5 * 900.0 / 2039.0 + 0.5 * 15.7 / 19.5), 1e-15);
  EXPECT_NEAR(t, 6.23261e-3, 1e-8);
  // Without bytes: all of it by the peak ratio (the old FP32 ratio).
  EXPECT_NEAR(scale_profiled_time(0.010, 0, Dtype::kFp32, v, a, "v", "a"), 0.010 * 15.7 / 19.5,
              1e-15);
  // Through the cost model as ProfiledWork; on the GPU it was measured on, unchanged.
  CostModel m;
  EXPECT_DOUBLE_EQ(m.seconds(ProfiledWork{0.010, &v, Dtype::kFp32, 4.5e9}, v), 0.010);
  EXPECT_NEAR(m.seconds(ProfiledWork{0.010, &v, Dtype::kFp32, 4.5e9}, a), t, 1e-15);
  // A dtype the target lacks is an InputError naming where.
  GpuSpec no_fp32 = a;
  no_fp32.peak.erase(Dtype::kFp32);
  EXPECT_THROW(scale_profiled_time(0.01, 0, Dtype::kFp32, v, no_fp32, "v", "a"), InputError);
}

std::string load_error(const std::string& text) {
  const auto file = std::filesystem::temp_directory_path() / "mlsim_roofline_test.json";
  std::ofstream(file) << text;
  try {
    RooflineProvider::load(file);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

TEST(Roofline, CalibrationFileErrorsNameTheJsonPath) {
  EXPECT_NE(load_error(R"({"gpus": {"A": {"_source": "t", "ops": {"add": {"regimes": [
      {"max_tokens": 64, "flops_efficiency": 1, "bandwidth_efficiency": 0.5, "overhead": "1us"}]}}}}})")
                .find("gpus.A.ops.add.regimes"),
            std::string::npos);
  EXPECT_NE(load_error(R"({"gpus": {"A": {"_source": "t", "ops": {"add": {"regimes": [
      {"max_tokens": 64, "flops_efficiency": 1, "bandwidth_efficiency": 0.5, "overhead": "1us"},
      {"max_tokens": 32, "flops_efficiency": 1, "bandwidth_efficiency": 0.5, "overhead": "1us"}]}}}}})")
                .find("gpus.A.ops.add.regimes[1].max_tokens"),
            std::string::npos);
  EXPECT_NE(load_error(R"({"gpus": {"A": {"_source": "t", "ops": {"add": {"regimes": [
      {"max_tokens": "none", "flops_efficiency": 2, "bandwidth_efficiency": 0.5, "overhead": "1us"}]}}}}})")
                .find("flops_efficiency"),
            std::string::npos);
  EXPECT_NE(load_error(R"({"gpus": {"A": {"_source": "t", "ops": {"add": {"regimes": [
      {"max_tokens": "none", "flops_efficiency": 1, "bandwidth_efficiency": 0.5, "overhead": "1us", "extra": 1}]}}}}})")
                .find("extra"),
            std::string::npos);
}

TEST(Roofline, ShippedCalibrationLoadsForBothProfiledGpus) {
  auto p = RooflineProvider::load(std::filesystem::path(MLSIM_SOURCE_DIR) /
                                  "workloads/hardware/roofline_calibration.json");
  for (const char* gpu : {"A100-SXM4-80GB", "H100-SXM5-80GB"})
    for (const char* op :
         {"emb", "input_layernorm", "attn_pre_proj", "attn_rope", "attn_prefill", "attn_decode",
          "attn_post_proj", "post_attention_layernorm", "mlp_up_proj", "mlp_act", "mlp_down_proj",
          "add", "final_norm", "lm_head"})
      EXPECT_NE(p->regime(gpu, op, 1), nullptr) << gpu << " " << op;
}

// FLOP efficiency by sequence length, by hand: points 0.2 at 512, 0.4 at 2048 and 0.5 at 8192,
// linear in log(length) between them, the end values outside. GPU of 100 TFLOP/s and 1 TB/s,
// regime 0.6 / bandwidth 1 / 1 us; work of 1e12 FLOPs and 1e6 bytes (compute bound):
//   no seq_len: the regime's 0.6 -> 1e12 / 60e12 = 16.667 ms + 1 us;
//   1024 (half-way in log between 512 and 2048): 0.3 -> 33.333 ms + 1 us;
//   4096 (half-way between 2048 and 8192): 0.45 -> 22.222 ms + 1 us;
//   100 and 1e6 (outside): 0.2 and 0.5 -> 50 ms and 20 ms, + 1 us.
TEST(Roofline, FlopEfficiencyBySequenceLengthByHand) {
  const GpuSpec a = test::make_gpu("A", 100, 10, 1000);
  RooflineProvider p;
  p.add("A", "attn_prefill", {RooflineRegime{0, true, 0.6, 1, 1e-6, 1}});
  p.add_seq_len_efficiency("A", "attn_prefill",
                           SeqLenEfficiency{{512, 2048, 8192}, {0.2, 0.4, 0.5}});
  auto at = [&](std::int64_t len) {
    return *p.operator_seconds({"attn_prefill", 1e12, 1e6, Dtype::kFp16, 4096, kShape, len}, a);
  };
  EXPECT_NEAR(at(0), 1.0 / 60 + 1e-6, 1e-12);
  EXPECT_NEAR(at(1024), 1.0 / 30 + 1e-6, 1e-12);
  EXPECT_NEAR(at(4096), 1.0 / 45 + 1e-6, 1e-12);
  EXPECT_NEAR(at(100), 1.0 / 20 + 1e-6, 1e-12);
  EXPECT_NEAR(at(1000000), 1.0 / 50 + 1e-6, 1e-12);
  EXPECT_NEAR(at(512), 1.0 / 20 + 1e-6, 1e-12);
  EXPECT_NEAR(at(2048), 1.0 / 40 + 1e-6, 1e-12);
  // Another operator of the same GPU keeps its regime whatever the length.
  p.add("A", "attn_decode", {RooflineRegime{0, true, 0.6, 1, 1e-6, 1}});
  EXPECT_NEAR(*p.operator_seconds({"attn_decode", 1e12, 1e6, Dtype::kFp16, 4096, kShape, 1024}, a),
              1.0 / 60 + 1e-6, 1e-12);
}

// Bandwidth efficiency by sequence length (decode attention: KV bytes read per second by KV
// length), by hand: points 0.5 at 1024 and 0.7 at 4096, linear in log(length) between, the end
// values outside. GPU of 100 TFLOP/s and 1 TB/s, regime FLOP 0.6 / bandwidth 0.9 / 1 us; work of
// 1e9 FLOPs and 1e9 bytes (memory bound: the FLOPs take 16.7 us at 60 TFLOP/s):
//   no seq_len: the regime's 0.9 -> 1e9 / 0.9e12 = 1.1111 ms + 1 us;
//   2048 (half-way in log): 0.6 -> 1.6667 ms + 1 us;
//   512 and 1e6 (outside): 0.5 and 0.7 -> 2 ms and 1.4286 ms, + 1 us.
// A FLOP curve on the same operator still prices compute-bound work by its own efficiency.
TEST(Roofline, BandwidthEfficiencyBySequenceLengthByHand) {
  const GpuSpec a = test::make_gpu("A", 100, 10, 1000);
  RooflineProvider p;
  p.add("A", "attn_decode", {RooflineRegime{0, true, 0.6, 0.9, 1e-6, 1}});
  p.add_seq_len_bandwidth_efficiency("A", "attn_decode",
                                     SeqLenEfficiency{{1024, 4096}, {0.5, 0.7}});
  auto at = [&](std::int64_t len, double flops = 1e9) {
    return *p.operator_seconds({"attn_decode", flops, 1e9, Dtype::kFp16, 8, kShape, len}, a);
  };
  EXPECT_NEAR(at(0), 1e-3 / 0.9 + 1e-6, 1e-15);
  EXPECT_NEAR(at(2048), 1e-3 / 0.6 + 1e-6, 1e-15);
  EXPECT_NEAR(at(512), 2e-3 + 1e-6, 1e-15);
  EXPECT_NEAR(at(1000000), 1e-3 / 0.7 + 1e-6, 1e-15);
  // 1e12 FLOPs at the regime's 0.6 (no FLOP curve): 16.667 ms, more than the bytes' 1.667 ms.
  EXPECT_NEAR(at(2048, 1e12), 1.0 / 60 + 1e-6, 1e-12);
  EXPECT_EQ(p.seq_len_efficiency("A", "attn_decode"), nullptr);
  ASSERT_NE(p.seq_len_bandwidth_efficiency("A", "attn_decode"), nullptr);
}

TEST(Roofline, SeqLenCurveErrorsNameTheJsonPath) {
  const std::string head = R"({"gpus": {"A": {"_source": "t", "ops": {"attn_prefill": {"regimes": [
      {"max_tokens": "none", "flops_efficiency": 1, "bandwidth_efficiency": 0.5, "overhead": "1us"}],
      "flops_efficiency_by_seq_len": )";
  EXPECT_NE(load_error(head + R"({"seq_len": [512, 256], "flops_efficiency": [0.2, 0.3]}}}}}})")
                .find("gpus.A.ops.attn_prefill.flops_efficiency_by_seq_len.seq_len"),
            std::string::npos);
  EXPECT_NE(load_error(head + R"({"seq_len": [512, 1024], "flops_efficiency": [0.2]}}}}}})")
                .find("flops_efficiency_by_seq_len.flops_efficiency"),
            std::string::npos);
  EXPECT_NE(load_error(head + R"({"seq_len": [512], "flops_efficiency": [1.5]}}}}}})")
                .find("flops_efficiency"),
            std::string::npos);
  EXPECT_NE(load_error(head + R"({"seq_len": [512], "flops_efficiency": [0.5], "x": 1}}}}}})")
                .find("flops_efficiency_by_seq_len.x"),
            std::string::npos);
}

// The shipped prefill curves are the cited figures' FlashAttention-2 values over the catalog's
// dense fp16 peak, to the file's 4 decimals: H100, the FlashAttention-3 paper's Figure 5(d)
// FlashAttention-2 bars (forward, causal, head dim 128: 191, 260, 298, 319, 333, 335 TFLOP/s at
// 512..16k, of 989.5); A100, the FlashInfer blog's Figure 4, A100 PCIe panel, FlashAttention 2.4.2
// with causal mask (142.7, 173.5, 188.0, 194.3, 199.7, 197.9 TFLOP/s at 2k..64k, of 312;
// docs/serving.md, "Attention by sequence length").
TEST(Roofline, ShippedAttentionCurveIsTheCitedFigure) {
  auto p = RooflineProvider::load(std::filesystem::path(MLSIM_SOURCE_DIR) /
                                  "workloads/hardware/roofline_calibration.json");
  auto check = [&](const char* gpu, const std::vector<std::int64_t>& lens,
                   const std::vector<double>& tflops, double peak) {
    const auto* c = p->seq_len_efficiency(gpu, "attn_prefill");
    ASSERT_NE(c, nullptr) << gpu;
    ASSERT_EQ(c->seq_len, lens) << gpu;
    for (std::size_t i = 0; i < lens.size(); ++i)
      EXPECT_NEAR(c->efficiency[i], tflops[i] / peak, 5e-5) << gpu << " " << lens[i];
  };
  check("H100-SXM5-80GB", {512, 1024, 2048, 4096, 8192, 16384}, {191, 260, 298, 319, 333, 335},
        989.5);
  check("A100-SXM4-80GB", {2048, 4096, 8192, 16384, 32768, 65536},
        {142.7, 173.5, 188.0, 194.3, 199.7, 197.9}, 312);
  EXPECT_EQ(p->seq_len_efficiency("H100-SXM5-80GB", "attn_decode"), nullptr);
}

TEST(Roofline, BandwidthCurveErrorsNameTheJsonPath) {
  const std::string head = R"({"gpus": {"A": {"_source": "t", "ops": {"attn_decode": {"regimes": [
      {"max_tokens": "none", "flops_efficiency": 1, "bandwidth_efficiency": 0.5, "overhead": "1us"}],
      "bandwidth_efficiency_by_seq_len": )";
  EXPECT_NE(load_error(head + R"({"seq_len": [512, 256], "bandwidth_efficiency": [0.2, 0.3]}}}}}})")
                .find("gpus.A.ops.attn_decode.bandwidth_efficiency_by_seq_len.seq_len"),
            std::string::npos);
  EXPECT_NE(load_error(head + R"({"seq_len": [512, 1024], "bandwidth_efficiency": [0.2]}}}}}})")
                .find("bandwidth_efficiency_by_seq_len.bandwidth_efficiency"),
            std::string::npos);
  // The FLOP curve's value key is not the bandwidth curve's.
  EXPECT_NE(load_error(head + R"({"seq_len": [512], "flops_efficiency": [0.5]}}}}}})")
                .find("bandwidth_efficiency_by_seq_len"),
            std::string::npos);
}

// The shipped decode-attention curves are the FlashInfer blog's batch-64 bandwidth utilisation
// (Figure 6: 32 query = 32 KV heads, query group 1; Figure 9: 32 query and 4 KV heads, group 8;
// head dim 128, f16), turned into mlsim's convention: the kernel time the utilisation gives for
// the bytes it reads (K and V of every key and Q: 2 x (2 x 64 x L x kvw + 64 x qw)) at the
// catalog's HBM bandwidth, and the share of that bandwidth which transformer_cost.cpp's bytes
// (2 x (2 x 64 x L x kvw + 2 x 64 x qw + 2 x 64 x kvw)) take once the 10 us launch overhead is
// taken off. E.g. H100, group 8, L = 8192, 88.7%: read 1,074,266,112 B -> 361.51 us; bytes
// 1,074,921,472 over 3.35 TB/s x 351.51 us -> 0.9128.
TEST(Roofline, ShippedDecodeAttentionCurveIsTheCitedTable) {
  auto p = RooflineProvider::load(std::filesystem::path(MLSIM_SOURCE_DIR) /
                                  "workloads/hardware/roofline_calibration.json");
  auto check = [&](const char* gpu, double bw, std::int64_t group, double kv_heads,
                   const std::vector<std::int64_t>& lens, const std::vector<double>& util) {
    const auto* c = p->seq_len_bandwidth_efficiency(gpu, "attn_decode", group);
    ASSERT_NE(c, nullptr) << gpu << " group " << group;
    ASSERT_EQ(c->seq_len, lens);
    const double qw = 32 * 128, kvw = kv_heads * 128, b = 64;
    for (std::size_t i = 0; i < lens.size(); ++i) {
      const double l = static_cast<double>(lens[i]);
      const double t = 2 * (2 * b * l * kvw + b * qw) / (util[i] / 100 * bw);
      const double bytes = 2 * (2 * b * l * kvw + 2 * b * qw + 2 * b * kvw);
      EXPECT_NEAR(c->efficiency[i], bytes / (bw * (t - 10e-6)), 5e-5)
          << gpu << " group " << group << " " << lens[i];
    }
  };
  const std::vector<std::int64_t> mha{32, 64, 128, 256, 512, 1024};
  const std::vector<std::int64_t> gqa{256, 512, 1024, 2048, 4096, 8192};
  check("H100-SXM5-80GB", 3.35e12, 1, 32, mha, {41.3, 51.1, 64.3, 76.0, 83.2, 88.6});
  check("H100-SXM5-80GB", 3.35e12, 8, 4, gqa, {36.8, 46.9, 60.5, 73.4, 82.6, 88.7});
  check("A100-SXM4-80GB", 2.039e12, 1, 32, mha, {41.0, 51.9, 65.6, 76.8, 83.8, 87.3});
  check("A100-SXM4-80GB", 2.039e12, 8, 4, gqa, {40.8, 50.7, 62.8, 71.4, 76.9, 79.4});
  EXPECT_NEAR(p->seq_len_bandwidth_efficiency("H100-SXM5-80GB", "attn_decode", 8)->efficiency[5],
              0.9128, 5e-5);
  // Curves by group only: none for "every shape", none for another group or operator.
  EXPECT_EQ(p->seq_len_bandwidth_efficiency("H100-SXM5-80GB", "attn_decode"), nullptr);
  EXPECT_EQ(p->seq_len_bandwidth_efficiency("A100-SXM4-80GB", "attn_decode", 4), nullptr);
  EXPECT_EQ(p->seq_len_bandwidth_efficiency("A100-SXM4-80GB", "attn_prefill", 8), nullptr);
}

// Bandwidth efficiency by query group, by hand: group 1 has 0.8 at 1024 and 0.9 at 4096, group 8
// 0.4 at 1024 and 0.6 at 4096 (each linear in log(length), clamped). GPU of 100 TFLOP/s and
// 1 TB/s, regime FLOP 0.6 / bandwidth 0.7 / 1 us; work of 1e6 FLOPs and 1e9 bytes (memory bound).
// The shape's group is heads / kv_heads:
//   group 1 (8 / 8), 2048: 0.85 -> 1e9 / 0.85e12 = 1.17647 ms + 1 us;
//   group 8 (64 / 8), 2048: 0.5 -> 2 ms + 1 us;
//   group 2 (16 / 8), 2048: a third of the way in log2 from 1 to 8: 0.85 + (0.5 - 0.85) / 3
//     = 0.733333 -> 1.36364 ms + 1 us; group 4: two thirds, 0.616667 -> 1.62162 ms + 1 us;
//   group 16 (past 8): group 8's 0.5; no KV heads in the shape: group 1;
//   group 2 at 512 (clamped on both curves): 0.8 + (0.4 - 0.8) / 3 = 0.666667 -> 1.5 ms + 1 us.
TEST(Roofline, BandwidthEfficiencyByQueryGroupByHand) {
  const GpuSpec a = test::make_gpu("A", 100, 10, 1000);
  RooflineProvider p;
  p.add("A", "attn_decode", {RooflineRegime{0, true, 0.6, 0.7, 1e-6, 1}});
  p.add_seq_len_bandwidth_efficiency("A", "attn_decode", SeqLenEfficiency{{1024, 4096}, {0.8, 0.9}},
                                     1);
  p.add_seq_len_bandwidth_efficiency("A", "attn_decode", SeqLenEfficiency{{1024, 4096}, {0.4, 0.6}},
                                     8);
  auto at = [&](std::int32_t heads, std::int32_t kv_heads, std::int64_t len) {
    const OperatorShape shape{8192, heads, kv_heads, 28672, 1};
    return *p.operator_seconds({"attn_decode", 1e6, 1e9, Dtype::kFp16, 2, shape, len}, a);
  };
  EXPECT_NEAR(at(8, 8, 2048), 1e-3 / 0.85 + 1e-6, 1e-15);
  EXPECT_NEAR(at(64, 8, 2048), 2e-3 + 1e-6, 1e-15);
  EXPECT_NEAR(at(16, 8, 2048), 1e-3 / (0.85 - 0.35 / 3) + 1e-6, 1e-15);
  EXPECT_NEAR(at(32, 8, 2048), 1e-3 / (0.85 - 0.7 / 3) + 1e-6, 1e-15);
  EXPECT_NEAR(at(128, 8, 2048), 2e-3 + 1e-6, 1e-15);
  EXPECT_NEAR(at(8, 0, 2048), 1e-3 / 0.85 + 1e-6, 1e-15);
  EXPECT_NEAR(at(16, 8, 512), 1.5e-3 + 1e-6, 1e-15);
  // Without a seq_len the regime's 0.7 whatever the group.
  EXPECT_NEAR(at(64, 8, 0), 1e-3 / 0.7 + 1e-6, 1e-15);
  ASSERT_NE(p.seq_len_bandwidth_efficiency("A", "attn_decode", 8), nullptr);
  EXPECT_EQ(p.seq_len_bandwidth_efficiency("A", "attn_decode"), nullptr);
  EXPECT_EQ(p.seq_len_bandwidth_efficiency("A", "attn_decode", 2), nullptr);
}

TEST(Roofline, BandwidthCurvesByGroupErrorsNameTheJsonPath) {
  const std::string head = R"({"gpus": {"A": {"_source": "t", "ops": {"attn_decode": {"regimes": [
      {"max_tokens": "none", "flops_efficiency": 1, "bandwidth_efficiency": 0.5, "overhead": "1us"}],
      "bandwidth_efficiency_by_seq_len": )";
  const std::string g1 = R"({"query_group": 1, "seq_len": [512], "bandwidth_efficiency": [0.5]})";
  // Loads: two groups, ascending.
  EXPECT_EQ(
      load_error(head + "[" + g1 +
                 R"(, {"query_group": 8, "seq_len": [512], "bandwidth_efficiency": [0.4]}]}}}}})"),
      "no error");
  const std::string descending = load_error(
      head + R"([{"query_group": 8, "seq_len": [512], "bandwidth_efficiency": [0.5]}, )" + g1 +
      "]}}}}}");
  EXPECT_NE(descending.find("bandwidth_efficiency_by_seq_len[1].query_group"), std::string::npos)
      << descending;
  EXPECT_NE(descending.find("ascending query groups"), std::string::npos) << descending;
  const std::string missing =
      load_error(head + R"([{"seq_len": [512], "bandwidth_efficiency": [0.5]}]}}}}})");
  EXPECT_NE(missing.find("bandwidth_efficiency_by_seq_len[0].query_group"), std::string::npos)
      << missing;
  EXPECT_NE(
      load_error(head +
                 R"([{"query_group": 0, "seq_len": [512], "bandwidth_efficiency": [0.5]}]}}}}})")
          .find("query_group"),
      std::string::npos);
  EXPECT_NE(load_error(head + "[]}}}}}").find("expected at least one curve"), std::string::npos);
  EXPECT_NE(
      load_error(
          head +
          R"([{"query_group": 1, "seq_len": [512, 256], "bandwidth_efficiency": [0.5, 0.6]}]}}}}})")
          .find("bandwidth_efficiency_by_seq_len[0].seq_len"),
      std::string::npos);
  // An unknown key in a curve of the list.
  EXPECT_NE(
      load_error(
          head +
          R"([{"query_group": 1, "seq_len": [512], "bandwidth_efficiency": [0.5], "x": 1}]}}}}})")
          .find("bandwidth_efficiency_by_seq_len[0].x"),
      std::string::npos);
}

TEST(ProfileTable, VidurTablesLoadAndReturnTheMeasuredMedian) {
  const std::filesystem::path dir =
      std::filesystem::path(MLSIM_SHARED_DATA_DIR) / "gpu_profiles/vidur";
  if (!std::filesystem::is_directory(dir)) GTEST_SKIP() << "no shared data at " << dir;
  auto p = ProfileTableProvider::load_vidur(dir, {{"a100", "A100-SXM4-80GB"}}, "compute.profiles");
  EXPECT_GT(p->points(), 50000u);
  const GpuSpec a = test::make_gpu("A100-SXM4-80GB", 312, 19.5, 2039);
  // Llama-2-7B, TP 1, 4096 tokens: the file's first two rows measure this point, attn_pre_proj
  // medians 1.911 and 1.8865 ms; the provider keeps their mean, 1.89875 ms.
  const auto t = p->operator_seconds({"attn_pre_proj", 0, 0, Dtype::kFp16, 4096, kShape}, a);
  ASSERT_TRUE(t);
  EXPECT_NEAR(*t, 1.89875e-3, 1e-12);
  EXPECT_THROW(ProfileTableProvider::load_vidur(dir, {{"b200", "X"}}, "compute.profiles"),
               InputError);
}

// A table written by hand: a repeated point keeps the mean (2 and 4 ms -> 3 ms), an empty cell
// is no measurement, each (operator, shape) is its own curve, and a bad cell is an InputError
// naming the file and row.
TEST(ProfileTable, AHandWrittenVidurTable) {
  const mlsim::testing::TempDir tmp;
  const auto write = [&](const std::string& rows) {
    std::filesystem::create_directories(tmp.path() / "toy/org/model");
    std::ofstream(tmp.path() / "toy/org/model/mlp.csv")
        << "num_tokens,num_tensor_parallel_workers,n_embd,n_head,n_kv_head,n_expanded_embd,"
           "time_stats.mlp_up_proj.median,time_stats.add.median\n"
        << rows;
  };
  write(
      "16,1,512,8,8,1024,2.0,\n"
      "16,1,512,8,8,1024,4.0,0.5\n"
      "\n"
      "32,2,512,8,8,1024,1.0,0.25\n");
  const auto p = ProfileTableProvider::load_vidur(tmp.path(), {{"toy", "A"}}, "compute.profiles");
  EXPECT_EQ(p->points(), 4u);
  const GpuSpec a = test::make_gpu("A", 100, 10, 1000);
  const OperatorShape tp1{512, 8, 8, 1024, 1}, tp2{512, 8, 8, 1024, 2};
  const auto at = [&](std::string_view op, std::int64_t tokens, const OperatorShape& shape) {
    return p->operator_seconds({op, 0, 0, Dtype::kFp16, tokens, shape}, a);
  };
  EXPECT_NEAR(*at("mlp_up_proj", 16, tp1), 3e-3, 1e-15);
  EXPECT_NEAR(*at("add", 16, tp1), 0.5e-3, 1e-15);
  EXPECT_NEAR(*at("mlp_up_proj", 32, tp2), 1e-3, 1e-15);
  EXPECT_NEAR(*at("add", 32, tp2), 0.25e-3, 1e-15);
  EXPECT_FALSE(at("mlp_up_proj", 32, tp1));  // beyond tp1's measured tokens

  write("16,1,512,8,8,1024,2.0,0.5\n16,1,512,8,8,1024,fast,0.5\n");
  try {
    ProfileTableProvider::load_vidur(tmp.path(), {{"toy", "A"}}, "compute.profiles");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("mlp.csv:3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("expected a number, got \"fast\""), std::string::npos)
        << e.what();
  }
  write("16,1,512,8,8,1024,2.0\n");
  EXPECT_THROW(ProfileTableProvider::load_vidur(tmp.path(), {{"toy", "A"}}, "compute.profiles"),
               InputError);  // 7 cells under 8 columns
}

}  // namespace
}  // namespace mlsim
