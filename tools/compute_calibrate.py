#!/usr/bin/env python3
"""Fits the platform's per-regime roofline to Vidur's operator profiles and reports, per operator
and token regime, the median error of each cost provider against those tables.

The roofline (sim_core/hardware/cost_model.hpp) prices an operator of F FLOPs and B HBM bytes as

    time = max(F / (flops_efficiency * peak), B / (bandwidth_efficiency * hbm_bw)) + overhead

with one (flops_efficiency, bandwidth_efficiency, overhead) per operator, GPU and token regime
(1-64, 65-1024, more than 1024 tokens). One fit for all token counts is dominated by the many
large-token rows and misses decode (1-64 tokens) by 45-84% for several operators; a fit per regime
does not. The fit minimises the median absolute relative error by coordinate descent over grids
(pure Python, no numpy).

Evaluation is on held-out data only:
  roofline      fitted on FIT_MODELS, errors on the other models of the same GPU folder;
  interpolation leave-one-out on token counts: each measured point predicted by linear
                interpolation between its two measured neighbours (the spacing doubles, so this
                overstates the error of interpolating between all points); end points skipped;
  scaled        the other GPU's interpolated profile times the ratio of the two GPUs' ideal
                rooflines (datasheet peak FLOP/s and HBM bandwidth), against this GPU's table.

FLOPs and bytes follow models/serving/transformer_cost.cpp (Megatron tensor-parallel split).

Usage:
  tools/compute_calibrate.py fit [SHARED_DATA_DIR] > workloads/hardware/roofline_calibration.json
  tools/compute_calibrate.py table [SHARED_DATA_DIR] [CALIBRATION_JSON]   # markdown tables
"""
import csv, glob, json, os, statistics, sys

# Dense fp16 tensor-core peak and HBM bandwidth, from workloads/hardware/gpus.json. Vidur's a100 and
# h100 folders are taken to be the 80GB SXM parts.
GPUS = {"a100": ("A100-SXM4-80GB", 312e12, 2039e9), "h100": ("H100-SXM5-80GB", 989.5e12, 3.35e12)}
FIT_MODELS = {"a100": ["Llama-2-7b-hf", "Llama-2-70b-hf", "Meta-Llama-3-8B", "Meta-Llama-3-70B"],
              "h100": ["Llama-2-7b-hf", "Llama-2-70b-hf"]}
GEMMS = {"attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj"}
OPS = ["emb", "input_layernorm", "attn_pre_proj", "attn_rope", "attn_post_proj",
       "post_attention_layernorm", "mlp_up_proj", "mlp_act", "mlp_down_proj", "add"]
REGIMES = [(1, 64), (65, 1024), (1025, None)]

# Attention kernels: no attention profile is in the shared data, so their efficiency by sequence
# length comes from published figures. The engine modelled is vLLM v0.5.4 (workloads/hardware/
# engines.json `vllm-v0`). Its default attention backend on A100/H100 for fp16/bf16 models with a
# supported head size, block size a multiple of 16, no sliding window and no fp8 KV cache is
# FLASH_ATTN (vllm-project/vllm, vllm/attention/selector.py, which_attn_to_use): the
# vllm-flash-attn package (2.5.9.post1 in the v0.5.x requirements-cuda.txt read, 2.6.1 in a v0.5.4
# user's reported environment), a build of FlashAttention. Its FlashAttentionImpl.forward
# (vllm/attention/backends/flash_attn.py) runs prefill through flash_attn_varlen_func (the
# FlashAttention-2 forward kernel) and decode through flash_attn_with_kvcache on the paged KV
# cache (block_table), FlashAttention's split-KV (Flash-Decoding) kernel; for grouped-query
# attention that kernel moves the query group into the query-length dimension
# (Dao-AILab/flash-attention, csrc/flash_attn/flash_api.cpp, mha_fwd_kvcache:
# seqlenq_ngroups_swapped), so one KV head's group is one tensor-core tile, which is what the
# FlashInfer blog's "Tensor Cores" GQA decode does. docs/serving.md, "Which attention kernel".
#
# Prefill: FLOP efficiency by sequence length.
#   H100: FlashAttention-3 paper (Shah, Bikshandi, Zhang, Thakkar, Ramani, Dao 2024, arXiv
#     2407.08608), Figure 5(d) "Forward, with causal mask, head dim 128", H100 80GB SXM5, FP16,
#     the FlashAttention-2 bars (FlashAttention 2.5.8, CUDA 12.3, clock fixed at 1830 MHz; batch
#     x sequence length = 16k tokens, hidden 2048, 16 heads), read from the figure as the
#     Dao-AILab/flash-attention README ships it (assets/flash3_fp16_fwd.png): 191, 260, 298, 319,
#     333, 335 TFLOPs/s at 512..16k.
#   A100: FlashInfer blog (Ye et al., "Accelerating Self-Attentions for LLM Serving with
#     FlashInfer", flashinfer.ai 2024-02-02; source flashinfer-ai/flashinfer-ai.github.io,
#     _posts/2024-01-03-introduce-flashinfer.md), Figure 4 "Single request prefill kernel
#     performance" (assets/imgs/single-prefill-benchmark.png), panel "A100 PCIe 80GB", curve
#     "FA 2.4.2, w/ causal mask": FlashAttention 2.4.2 built with CUDA 12.3.1, nvbench cold-L2 GPU
#     time, batch 1, 32 heads = 32 KV heads, head dim 128, f16, query length = KV length; read
#     from the PNG's geometry (marker centre = its lowest pixel row - 14.5 px, the marker being
#     partly covered; 1.104 px per TFLOP/s; +-2 TFLOP/s): 142.7, 173.5, 188.0, 194.3, 199.7,
#     197.9 TFLOP/s at 2k..64k (the markers below 2k overlap and are not read). [assumed] the
#     PCIe part's fraction of its 312 TFLOP/s peak holds for the SXM4 part (same peak; the
#     SXM4's higher power limit can only help).
#   Both: FLOPs counted as the figures count them (causal = half of 4 seqlen^2 d heads), the
#   convention of transformer_cost.cpp's pairs; efficiency = TFLOP/s over the catalog's dense fp16
#   peak; piecewise linear in log length, clamped outside the points.
SEQ_LEN_EFFICIENCY = {
    "a100": {"seq_len": [2048, 4096, 8192, 16384, 32768, 65536],
             "tflops": [142.7, 173.5, 188.0, 194.3, 199.7, 197.9],
             "_source": "FlashInfer blog (Ye et al., flashinfer.ai 2024-02-02) Figure 4, A100 PCIe 80GB panel, "
                        "'FA 2.4.2, w/ causal mask' (FlashAttention 2.4.2, CUDA 12.3.1, nvbench cold L2; batch 1, "
                        "32 heads = 32 KV heads, head dim 128, f16): 142.7, 173.5, 188.0, 194.3, 199.7, 197.9 "
                        "TFLOPs/s at 2k..64k read from the PNG's geometry (+-2), over the 312 TFLOP/s dense peak "
                        "[assumed: the PCIe part's fraction holds for SXM4]; the engine modelled (vLLM v0.5.4) "
                        "prefills with FlashAttention-2 (vllm-flash-attn, FlashAttention 2.5.9-2.6.1); piecewise linear in log length, "
                        "clamped outside 2k..64k"},
    "h100": {"seq_len": [512, 1024, 2048, 4096, 8192, 16384],
             "tflops": [191, 260, 298, 319, 333, 335],
             "_source": "FlashAttention-3 paper (arXiv 2407.08608) Figure 5(d): forward, causal, head dim 128, "
                        "H100 80GB SXM5 FP16, FlashAttention-2 2.5.8 bars (191, 260, 298, 319, 333, 335 TFLOPs/s "
                        "at 512..16k; batch x length = 16k tokens, 16 heads), over the 989.5 TFLOP/s dense "
                        "peak; the engine modelled (vLLM v0.5.4) prefills with FlashAttention-2 (vllm-flash-attn, "
                        "FlashAttention 2.5.9-2.6.1); piecewise linear in log length, clamped outside 512..16k"},
}
REGIME_NAMES = ["1-64", "65-1024", ">1024"]

# Decode: HBM bandwidth efficiency by KV length, one curve per query group (query heads per KV
# head), from the FlashInfer blog (as above; conditions: nvbench cold-L2 GPU time, CUDA 12.3.1,
# f16, head dim 128, paged KV cache, batch 64; "bandwidth utilization = number of bytes read by the
# kernel / kernel latency / hardware GPU memory bandwidth", the blog's H100 SXM 80GB at 3,352 GB/s
# and A100 PCIe 80GB at 1,935 GB/s). Read from the PNGs' geometry (marker centres in the columns
# of the plotted lengths, scaled by the gridlines; +-1 point):
#   query group 8: Figure 9 "Batch GQA decode performance" (assets/imgs/batch-gqa-benchmark.png),
#     llama2-70b at tp=2 (32 query heads, 4 KV heads), batch 64, curve "FlashInfer Tensor Cores"
#     (the tensor-core GQA decode, the kernel class of FlashAttention's decode for GQA, above),
#     H100 SXM 80GB and A100 PCIe 80GB panels, lengths 256..8192 (the markers below 256 overlap);
#   query group 1: Figure 6 "Batch decode kernel performance" (assets/imgs/batch-decode-benchmark.png),
#     llama2-7b (32 query heads = 32 KV heads), batch 64, curve "FlashInfer(batch_size=64)" (solid;
#     FlashAttention's paged decode is not in the figure: FlashAttention 2.4.2 had no paged KV),
#     lengths 32..1024 (the figure's batch-64 range).
# Not used: the same figures' vLLM 0.2.6 PagedAttention-v2 curves (v0.5.4 runs that kernel only in
# its XFORMERS fallback backend: 15-29% utilisation for GQA on H100, 18-26% on A100).
# Conversion to mlsim's convention (the roofline's bytes / (efficiency x bandwidth) + 10 us launch
# overhead [assumed] gives the kernel's time at every published point):
#   kernel time t = bytes read (K and V of every key, and Q) / (utilisation x the catalog GPU's
#     HBM bandwidth) [assumed: the A100 PCIe part's fraction of its own bandwidth holds for the SXM4
#     part; the H100 is the same part, 3,350 vs the blog's 3,352 GB/s];
#   efficiency = transformer_cost.cpp's bytes (K and V read, Q read and output written, the new
#     K and V written) / (bandwidth x (t - 10 us)).
# Between the two groups the serving model interpolates linearly in log(group), clamped
# (cost_model.cpp) [assumed].
DECODE_CURVES = {
    "h100": [
        {"query_group": 1, "q_heads": 32, "kv_heads": 32, "batch": 64,
         "seq_len": [32, 64, 128, 256, 512, 1024], "util_pct": [41.3, 51.1, 64.3, 76.0, 83.2, 88.6],
         "figure": "Figure 6, H100 SXM 80GB panel, FlashInfer batch 64 (llama2-7b: 32 query = 32 KV heads)"},
        {"query_group": 8, "q_heads": 32, "kv_heads": 4, "batch": 64,
         "seq_len": [256, 512, 1024, 2048, 4096, 8192], "util_pct": [36.8, 46.9, 60.5, 73.4, 82.6, 88.7],
         "figure": "Figure 9, H100 SXM 80GB panel, FlashInfer Tensor Cores batch 64 (llama2-70b at tp=2: "
                   "32 query heads, 4 KV heads)"}],
    "a100": [
        {"query_group": 1, "q_heads": 32, "kv_heads": 32, "batch": 64,
         "seq_len": [32, 64, 128, 256, 512, 1024], "util_pct": [41.0, 51.9, 65.6, 76.8, 83.8, 87.3],
         "figure": "Figure 6, A100 PCIe 80GB panel, FlashInfer batch 64 (llama2-7b: 32 query = 32 KV heads)"},
        {"query_group": 8, "q_heads": 32, "kv_heads": 4, "batch": 64,
         "seq_len": [256, 512, 1024, 2048, 4096, 8192], "util_pct": [40.8, 50.7, 62.8, 71.4, 76.9, 79.4],
         "figure": "Figure 9, A100 PCIe 80GB panel, FlashInfer Tensor Cores batch 64 (llama2-70b at tp=2: "
                   "32 query heads, 4 KV heads)"}],
}
HEAD_DIM = 128
DECODE_OVERHEAD_US = 10.0


def decode_bandwidth_efficiency(c, bw):
    """Per published point: transformer_cost.cpp's decode-attention bytes / (bw x (t - overhead)),
    t the kernel time the published utilisation implies for the bytes it reads (K, V and Q)."""
    out = []
    qw, kvw, b = c["q_heads"] * HEAD_DIM, c["kv_heads"] * HEAD_DIM, c["batch"]
    for l, u in zip(c["seq_len"], c["util_pct"]):
        read = 2 * (2 * b * l * kvw + b * qw)
        t = read / (u / 100 * bw)
        bytes_ = 2 * (2 * b * l * kvw + 2 * b * qw + 2 * b * kvw)
        out.append(round(bytes_ / (bw * (t - DECODE_OVERHEAD_US * 1e-6)), 4))
    return out


def decode_source(c, gpu):
    return (f"FlashInfer blog (Ye et al., flashinfer.ai 2024-02-02) {c['figure']}: bandwidth utilisation "
            f"{', '.join(f'{u:g}' for u in c['util_pct'])}% at KV length {c['seq_len'][0]}..{c['seq_len'][-1]} "
            "(nvbench cold L2, CUDA 12.3.1, f16, head dim 128, paged KV), read from the PNG's geometry; "
            "efficiency = transformer_cost.cpp's bytes / (" + gpu + " HBM bandwidth x (kernel time - 10 us)), "
            "kernel time = K+V+Q bytes / (utilisation x that bandwidth)" +
            (" [assumed: the A100 PCIe part's fraction holds for SXM4]" if gpu == "A100-SXM4-80GB" else "") +
            "; stands for the engine's decode kernel (vLLM v0.5.4: FlashAttention 2.5.9-2.6.1 flash_attn_with_kvcache) "
            "[assumed]; piecewise linear in log KV length, clamped outside")

EF_GRID = [x / 100 for x in range(20, 101, 2)]
EB_GRID = [x / 100 for x in range(2, 101, 2)]
OV_GRID = [x * 0.25 for x in range(0, 121)]  # microseconds, 0-30
# Element-wise kernels on few tokens take the same time whatever the count below some size (their
# launch grid does not shrink): "min_tokens" prices them as if they had at least that many tokens.
# Only for operators whose FLOPs and bytes are proportional to the token count.
MIN_TOKENS_GRID = [1, 8, 16, 32, 64, 96, 128, 192, 256]
PROPORTIONAL = {"emb", "input_layernorm", "attn_rope", "post_attention_layernorm", "mlp_act", "add"}


def regime_of(tokens):
    for i, (lo, hi) in enumerate(REGIMES):
        if tokens >= lo and (hi is None or tokens <= hi):
            return i
    raise ValueError(tokens)


def work(op, T, shape, t, b=2):
    h, nh, kvh, f, gated = shape
    kv = kvh * (h // nh)

    def gemm(k, n):
        return 2 * T * k * n, b * (T * k + k * n + T * n)
    if op == "attn_pre_proj":
        return gemm(h, (h + 2 * kv) / t)
    if op == "attn_post_proj":
        return gemm(h / t, h)
    if op == "mlp_up_proj":
        return gemm(h, (2 if gated else 1) * f / t)
    if op == "mlp_down_proj":
        return gemm(f / t, h)
    if op == "mlp_act":
        return (5 * T * f / t, b * 3 * T * f / t) if gated else (5 * T * f / t, b * 2 * T * f / t)
    if op == "attn_rope":
        return 6 * T * (h + kv) / t, b * 2 * T * (h + kv) / t
    if op in ("input_layernorm", "post_attention_layernorm"):
        return 4 * T * h, b * (2 * T * h + h)
    if op == "add":
        return T * h, b * 3 * T * h
    if op == "emb":
        return 0, b * 2 * T * h
    raise KeyError(op)


def load(data, folder):
    """rows[(model, op)] = {(tp, tokens): seconds}, shapes[model] = (h, heads, kv_heads, ffn, gated)."""
    rows, shapes = {}, {}
    for path in sorted(glob.glob(f"{data}/gpu_profiles/vidur/{folder}/*/*/mlp.csv")):
        model = os.path.basename(os.path.dirname(path))
        with open(path) as fh:
            for r in csv.DictReader(fh):
                shapes[model] = (int(r["n_embd"]), int(r["n_head"]), int(r["n_kv_head"]),
                                 int(r["n_expanded_embd"]), r["use_gated_mlp"] == "True")
                T, t = int(r["num_tokens"]), int(r["num_tensor_parallel_workers"])
                for op in OPS:
                    key = f"time_stats.{op}.median"
                    if key in r and r[key] != "":
                        rows.setdefault((model, op), {}).setdefault((t, T), []).append(float(r[key]) * 1e-3)
    # Some points are measured twice: keep the mean, as the C++ provider does.
    rows = {k: {p: sum(v) / len(v) for p, v in pts.items()} for k, pts in rows.items()}
    return rows, shapes


def roofline(F, B, peak, bw, ef, eb, ov):
    return max(F / (ef * peak), B / (eb * bw)) + ov


def floored(F, B, T, t0):
    k = max(T, t0) / T
    return F * k, B * k


def median_error(samples, ef, eb, ov, peak, bw, t0=1):
    return statistics.median(abs(roofline(*floored(F, B, T, t0), peak, bw, ef, eb, ov) - y) / y
                             for F, B, T, y in samples)


def fit(samples, peak, bw, gemm, proportional):
    """Coordinate descent over the grids from a few starts; returns (err, ef, eb, ov_us, t0)."""
    if len(samples) > 800:  # deterministic thinning keeps the search fast; every regime keeps > 800
        samples = samples[:: len(samples) // 800 + 1]
    best = None
    grids = (("ef", EF_GRID if gemm else [1.0]), ("eb", EB_GRID), ("ov", OV_GRID),
             ("t0", MIN_TOKENS_GRID if proportional else [1]))
    for start in ((0.7, 0.5, 5.0, 1), (0.9, 0.2, 0.0, 1), (0.5, 0.9, 10.0, 64)):
        cur = dict(zip(("ef", "eb", "ov", "t0"), start))
        if not gemm:
            cur["ef"] = 1.0
        if not proportional:
            cur["t0"] = 1
        err = median_error(samples, cur["ef"], cur["eb"], cur["ov"] * 1e-6, peak, bw, cur["t0"])
        for _ in range(8):
            improved = False
            for which, grid in grids:
                for v in grid:
                    cand = dict(cur, **{which: v})
                    e = median_error(samples, cand["ef"], cand["eb"], cand["ov"] * 1e-6, peak, bw, cand["t0"])
                    if e < err - 1e-12:
                        err, cur, improved = e, cand, True
            if not improved:
                break
        if best is None or err < best[0]:
            best = (err, cur["ef"], cur["eb"], cur["ov"], cur["t0"])
    return best


def samples_for(rows, shapes, models, op, regime):
    out = []
    for m in models:
        for (t, T), y in sorted(rows.get((m, op), {}).items()):
            if regime_of(T) == regime:
                F, B = work(op, T, shapes[m], t)
                out.append((F, B, T, y))
    return out


def cmd_fit(data):
    out = {"_comment": "Per-regime roofline of every operator, fitted by tools/compute_calibrate.py fit on "
                       "microsoft/vidur data/profiling/compute/{a100,h100} (../shared/data/gpu_profiles/vidur); "
                       "regimes by token count: 1-64, 65-1024, more. docs/hardware.md has the errors on held-out models.",
           "gpus": {}}
    for folder, (name, peak, bw) in GPUS.items():
        rows, shapes = load(data, folder)
        models = FIT_MODELS[folder]
        ops = {}
        for op in OPS:
            regimes = []
            for ri, (lo, hi) in enumerate(REGIMES):
                sel = samples_for(rows, shapes, models, op, ri)
                err, ef, eb, ov, t0 = fit(sel, peak, bw, op in GEMMS, op in PROPORTIONAL)
                regimes.append({"max_tokens": hi if hi is not None else "none", "flops_efficiency": ef,
                                "bandwidth_efficiency": eb, "overhead": f"{ov:g}us", "min_tokens": t0,
                                "_fit": f"median |error| {100 * err:.1f}% over {len(sel)} rows of {', '.join(models)}"})
            ops[op] = {"regimes": regimes}
        ops["final_norm"] = {"_fit": "no profile: the input_layernorm fit (same kernel)",
                             "regimes": ops["input_layernorm"]["regimes"]}
        ops["lm_head"] = {"_fit": "no profile: the mlp_up_proj fit (a GEMM of the same kind)",
                          "regimes": ops["mlp_up_proj"]["regimes"]}
        c = SEQ_LEN_EFFICIENCY[folder]
        ops["attn_prefill"] = {"_fit": "no profile in the shared data: flops_efficiency_by_seq_len for work that gives "
                                       "its sequence length (the serving model); the regime's 0.6 [assumed: "
                                       "FlashAttention-2's 50-73% of peak forward FLOP/s on A100, Dao 2023, arXiv "
                                       "2307.08691, abstract] only for work that does not (the training kernels); "
                                       "bandwidth and overhead assumed",
                               "regimes": [{"max_tokens": "none", "flops_efficiency": 0.6,
                                            "bandwidth_efficiency": 0.8, "overhead": "10us"}],
                               "flops_efficiency_by_seq_len": {
                                   "_source": c["_source"], "seq_len": c["seq_len"],
                                   "flops_efficiency": [round(t * 1e12 / peak, 4) for t in c["tflops"]]}}
        ops["attn_decode"] = {"_fit": "no profile in the shared data: bandwidth_efficiency_by_seq_len, one curve per "
                                      "query group, for work that gives its KV length (the serving model); the "
                                      "regime's 70% [assumed] only for work that does not; FLOP efficiency and 10us "
                                      "launch overhead assumed",
                              "regimes": [{"max_tokens": "none", "flops_efficiency": 0.6,
                                           "bandwidth_efficiency": 0.7, "overhead": "10us"}],
                              "bandwidth_efficiency_by_seq_len": [
                                  {"_source": decode_source(c, name), "query_group": c["query_group"],
                                   "seq_len": c["seq_len"], "bandwidth_efficiency": decode_bandwidth_efficiency(c, bw)}
                                  for c in DECODE_CURVES[folder]]}
        out["gpus"][name] = {"_source": f"vidur {folder} profiles of {', '.join(models)}, fitted per regime by "
                                        "tools/compute_calibrate.py", "ops": ops}
    json.dump(out, sys.stdout, indent=1)
    print()


def interpolate(points, T):
    """Linear between the measured neighbours; None outside the measured range."""
    xs = sorted(points)
    if T < xs[0] or T > xs[-1]:
        return None
    for a, b in zip(xs, xs[1:]):
        if a <= T <= b:
            return points[a] if a == b else points[a] + (points[b] - points[a]) * (T - a) / (b - a)
    return points[xs[-1]]


def read_calibration(path, gpu):
    cal = json.load(open(path))["gpus"][gpu]["ops"]
    out = {}
    for op, e in cal.items():
        regs = []
        for r in e["regimes"]:
            regs.append((None if r["max_tokens"] == "none" else int(r["max_tokens"]), r["flops_efficiency"],
                         r["bandwidth_efficiency"], float(r["overhead"].rstrip("us")) * 1e-6,
                         r.get("min_tokens", 1)))
        out[op] = regs
    return out


def calibrated_time(cal, op, F, B, T, peak, bw):
    for hi, ef, eb, ov, t0 in cal[op]:
        if hi is None or T <= hi:
            return roofline(*floored(F, B, T, t0), peak, bw, ef, eb, ov)
    raise ValueError(T)


def pct(errors):
    return f"{100 * statistics.median(errors):.1f}" if errors else "-"


def cmd_table(data, cal_path):
    loaded = {f: load(data, f) for f in GPUS}
    for folder, (name, peak, bw) in GPUS.items():
        rows, shapes = loaded[folder]
        cal = read_calibration(cal_path, name)
        held_out = sorted(m for m in shapes if m not in FIT_MODELS[folder])
        other = "h100" if folder == "a100" else "a100"
        o_name, o_peak, o_bw = GPUS[other]
        o_rows, _ = loaded[other]
        print(f"\n{name} (vidur `{folder}`): median |error| in %, per regime of token counts "
              f"(roofline on held-out models {', '.join(held_out)}; interpolation leave-one-out on every model; "
              f"scaled from {o_name})\n")
        print("| operator | roofline 1-64 | 65-1024 | >1024 | interpolation 1-64 | 65-1024 | >1024 | "
              "scaled 1-64 | 65-1024 | >1024 |")
        print("|---|" + "---:|" * 9)
        for op in OPS:
            roof, interp, scaled = ([[] for _ in REGIMES] for _ in range(3))
            for (m, o), pts in rows.items():
                if o != op:
                    continue
                by_tp = {}
                for (t, T), y in pts.items():
                    by_tp.setdefault(t, {})[T] = y
                for t, curve in by_tp.items():
                    xs = sorted(curve)
                    for i, T in enumerate(xs):
                        y, r = curve[T], regime_of(T)
                        F, B = work(op, T, shapes[m], t)
                        if m in held_out:
                            roof[r].append(abs(calibrated_time(cal, op, F, B, T, peak, bw) - y) / y)
                        if 0 < i < len(xs) - 1:
                            rest = {x: curve[x] for x in (xs[i - 1], xs[i + 1])}
                            interp[r].append(abs(interpolate(rest, T) - y) / y)
                        src = o_rows.get((m, op), {})
                        if (t, T) in src:
                            ratio = max(F / peak, B / bw) / max(F / o_peak, B / o_bw) if F or B else 1
                            scaled[r].append(abs(src[(t, T)] * ratio - y) / y)
            cells = [pct(e) for e in roof] + [pct(e) for e in interp] + [pct(e) for e in scaled]
            print(f"| {op} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else "table"
    data = sys.argv[2] if len(sys.argv) > 2 else "../shared/data"
    if cmd == "fit":
        cmd_fit(data)
    elif cmd == "table":
        cmd_table(data, sys.argv[3] if len(sys.argv) > 3 else "workloads/hardware/roofline_calibration.json")
    else:
        sys.exit(__doc__)
