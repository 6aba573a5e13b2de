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

# Prefill attention's FLOP efficiency by sequence length, from a paper's figure (no attention
# profile is in the shared data). Only what could be read from a published figure is used:
#   H100: FlashAttention-3 paper (Shah, Bikshandi, Zhang, Thakkar, Ramani, Dao 2024, arXiv
#     2407.08608), Figure 5(d) "Forward, with causal mask, head dim 128", H100 80GB SXM5, FP16,
#     the FlashAttention-2 bars (FlashAttention 2.5.8, CUDA 12.3, clock fixed at 1830 MHz; batch
#     x sequence length = 16k tokens, hidden 2048, 16 heads), read from the figure as the
#     Dao-AILab/flash-attention README ships it (assets/flash3_fp16_fwd.png): 191, 260, 298, 319,
#     333, 335 TFLOPs/s at 512..16k. FlashAttention-2 [assumed]: the engine modelled (vLLM v0)
#     runs FlashAttention-2 kernels for prefill (FlashAttention-3 is 1.5-1.8x faster). FLOPs counted as 4 seqlen^2 d heads / 2 (causal), the
#     convention of transformer_cost.cpp's pairs. Efficiency = TFLOPs/s over the catalog's
#     dense fp16 peak (989.5).
#   A100: not given. FlashAttention-2's paper (Dao 2023, arXiv 2307.08691) plots forward speed on
#     A100 by length (Figure 5, forward only), but no readable copy was found: the repository
#     ships only its forward+backward figure, and the one text transcription found
#     (viktor-shcherb/msc_thesis, references/2024-05-flashattention-2/sections/
#     04_empirical-validation.md) misreads that forward+backward figure (4 of the 6 FA-2 values of
#     panel (a) shifted by one length, checked against the image), so its forward values were
#     not used. A100 keeps one efficiency for every length.
SEQ_LEN_EFFICIENCY = {
    "h100": {"seq_len": [512, 1024, 2048, 4096, 8192, 16384],
             "tflops": [191, 260, 298, 319, 333, 335],
             "_source": "FlashAttention-3 paper (arXiv 2407.08608) Figure 5(d): forward, causal, head dim 128, "
                        "H100 80GB SXM5 FP16, FlashAttention-2 2.5.8 bars (191, 260, 298, 319, 333, 335 TFLOPs/s "
                        "at 512..16k; batch x length = 16k tokens, 16 heads), over the 989.5 TFLOP/s dense "
                        "peak; piecewise linear in log length, clamped outside 512..16k"},
}
REGIME_NAMES = ["1-64", "65-1024", ">1024"]

# Decode attention's HBM bandwidth efficiency by KV length (memory bound: the KV bytes it reads
# over HBM bandwidth), from a published table (no attention profile is in the shared data):
#   A100: Flash-Decoding (Dao, Haziza, Massa, Sizov, "Flash-Decoding for long-context inference",
#     PyTorch blog, 2023-10-13, pytorch.org/blog/flash-decoding), section "Component-level
#     micro-benchmarks": scaled multi-head attention on "A100", f16, 16 query heads of dimension
#     128, 2 key/value heads (CodeLlama-34B at TP 4), one query token per sequence, B sequences of
#     seqlen keys (B x seqlen = 64k, 128k at the last point); the Flash-Decoding column (us).
#     Efficiency = the kernel's HBM bytes as transformer_cost.cpp counts them (K and V of every
#     key, Q read and output written, the new K and V written) over the catalog's 2,039 GB/s
#     times (the published time less the regime's 10 us launch overhead [assumed]), so that the
#     roofline gives the published time at each published point. [assumed] the A100 is the 80GB
#     SXM4 part (the blog does not say; at the 40GB part's 1,555 GB/s every value would be 1.31x
#     higher); [assumed] the engine modelled (vLLM v0's PagedAttention kernels, of which V2
#     also splits the KV sequence) reaches what Flash-Decoding does. FLOPs (4 x keys x 2048 per point: 0.54 GFLOP, 2.9 us at
#     the regime's 60% of peak) never bind.
#   H100: no published per-length figure found; one [assumed] 70% for every length.
DECODE_SEQ_LEN_EFFICIENCY = {
    "a100": {"seq_len": [256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072],
             "batch": [256, 128, 64, 32, 16, 8, 4, 2, 1, 1],
             "us": [63.4, 67.7, 77.7, 58.5, 57, 56.4, 58.2, 60.3, 64.4, 106.6],
             "q_dim": 16 * 128, "kv_dim": 2 * 128, "overhead_us": 10.0,
             "_source": "Flash-Decoding blog (Dao, Haziza, Massa, Sizov, PyTorch blog 2023-10-13), component "
                        "micro-benchmark on A100, f16, 16 query heads x 128, 2 KV heads, B x seqlen = 64k keys "
                        "(128k at 131072): Flash-Decoding 63.4, 67.7, 77.7, 58.5, 57, 56.4, 58.2, 60.3, 64.4, "
                        "106.6 us at seqlen 256..131072; efficiency = the kernel's HBM bytes "
                        "(transformer_cost.cpp) / (2,039 GB/s x (time - the 10 us overhead)) [assumed: A100 "
                        "80GB SXM4; vLLM's paged decode kernel as fast]; piecewise linear in log KV length, "
                        "clamped outside 256..131072"},
}


def decode_bandwidth_efficiency(c, bw):
    """Per published point: bytes (transformer_cost.cpp's decode attention) / (bw x kernel time)."""
    out = []
    for b, l, us in zip(c["batch"], c["seq_len"], c["us"]):
        kv_read = b * l
        bytes_ = 2 * (2 * kv_read * c["kv_dim"] + 2 * b * c["q_dim"] + 2 * b * c["kv_dim"])
        out.append(round(bytes_ / (bw * (us - c["overhead_us"]) * 1e-6), 4))
    return out

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
        ops["attn_prefill"] = {"_fit": "no profile in the shared data [assumed]: FlashAttention-2 (Dao 2023, arXiv "
                                       "2307.08691, abstract) reaches 50-73% of peak forward FLOP/s on A100; 0.6 taken; "
                                       "bandwidth and overhead assumed",
                               "regimes": [{"max_tokens": "none", "flops_efficiency": 0.6,
                                            "bandwidth_efficiency": 0.8, "overhead": "10us"}]}
        if folder in SEQ_LEN_EFFICIENCY:
            c = SEQ_LEN_EFFICIENCY[folder]
            ops["attn_prefill"]["_fit"] = ("flops_efficiency_by_seq_len for work that gives its sequence length "
                                           "(the serving model); the regime's 0.6 [assumed] only for work that "
                                           "does not (the training kernels); bandwidth and overhead assumed")
            ops["attn_prefill"]["flops_efficiency_by_seq_len"] = {
                "_source": c["_source"], "seq_len": c["seq_len"],
                "flops_efficiency": [round(t * 1e12 / peak, 4) for t in c["tflops"]]}
        ops["attn_decode"] = {"_fit": "no profile in the shared data [assumed]: paged decode attention is memory "
                                      "bound; 70% of HBM bandwidth and 10us launch overhead assumed, not calibrated",
                              "regimes": [{"max_tokens": "none", "flops_efficiency": 0.6,
                                           "bandwidth_efficiency": 0.7, "overhead": "10us"}]}
        if folder in DECODE_SEQ_LEN_EFFICIENCY:
            c = DECODE_SEQ_LEN_EFFICIENCY[folder]
            ops["attn_decode"]["_fit"] = ("bandwidth_efficiency_by_seq_len for work that gives its KV length "
                                          "(the serving model); the regime's 70% [assumed] only for work that "
                                          "does not; FLOP efficiency and 10us launch overhead assumed")
            ops["attn_decode"]["bandwidth_efficiency_by_seq_len"] = {
                "_source": c["_source"], "seq_len": c["seq_len"],
                "bandwidth_efficiency": decode_bandwidth_efficiency(c, bw)}
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
