#!/usr/bin/env python3
"""Prefill and decode iteration times of the serving model for Llama-2-70B at TP 2/4/8 on A100 and
H100 (issue 15's end-to-end table), measured by running the simulator, not by calling its
compute model: for each (GPU, TP, batch, prompt) a trace of `batch` requests arriving at the same
instant with `prompt` tokens and 2 output tokens is served by one replica (continuous batching,
batch limits raised so the burst is one prefill). TTFT is then the prefill iteration (with the
engine's per-iteration overhead), and TPOT the one decode iteration that follows (batch `batch`,
context prompt + 1). A point whose requests did not all get the same TTFT (the KV cache could not
hold the burst, so part of it waited) is reported as "-".

Prompts of 8192 tokens exceed Llama-2-70B's 4,096-token context (the simulator refuses them), so
that column is served by the catalog's llama-3.1-70b (context 131,072): the same layer shape
(80 layers, hidden 8192, 64 heads, 8 KV heads, FFN 28672), a 128,256-token vocabulary instead of
32,000 (a larger LM head and embedding, more weight memory). The table marks the column.

usage: tools/serving_iteration_table.py [BUILD_DIR] [--out docs_table.md]
Needs ../shared/data (Vidur's operator tables). About a minute on two cores.
"""
import csv
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCENARIO = os.path.join(ROOT, "workloads", "scenarios", "serving_azure_conv_70b.json")
GPUS = [("A100-SXM4-80GB", "A100"), ("H100-SXM5-80GB", "H100")]
TPS = [2, 4, 8]
BATCHES = [1, 4, 16, 64]
# (prompt, catalog model): Llama-2-70B's context is 4096 tokens (prompt + output), so the 8192
# column takes Llama-3.1-70B, the catalog's model of the same layer shape with a longer context.
PROMPTS = [(128, "llama-2-70b"), (512, "llama-2-70b"), (2048, "llama-2-70b"), (4000, "llama-2-70b"),
           (8192, "llama-3.1-70b")]


def run_point(mlsim, tmp, gpu, tp, batch, prompt, model, metrics=False):
    trace = os.path.join(tmp, f"burst_{batch}_{prompt}.csv")
    with open(trace, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["TIMESTAMP", "ContextTokens", "GeneratedTokens"])
        for _ in range(batch):
            w.writerow(["2023-11-16 18:00:00.0000000", prompt, 2])
    out = os.path.join(tmp, f"run_{gpu}_{tp}_{batch}_{prompt}_{model}")
    sets = [f"workload.trace={trace}",
            f'system.family=["{model}"]', f"system.separate[0].model={model}",
            f"topology.hardware.gpu={gpu}",
            'compute.profiles.gpus={"a100": "A100-SXM4-80GB", "h100": "H100-SXM5-80GB"}',
            f"system.separate[0].tp={tp}",
            "system.max_batch_tokens=1048576", "system.max_batch_requests=256"]
    cmd = [mlsim, "run", SCENARIO, "--quiet", "--out", out]
    for s in sets:
        cmd += ["--set", s]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode == 2 and "does not fit" in res.stderr:
        return None  # the weights do not fit this TP degree's GPUs
    if res.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{res.stderr}")
    m = json.load(open(os.path.join(out, "summary.json")))["metrics"]
    if metrics:
        return m
    if m["serving_ttft_max_s"] - m["serving_ttft_mean_s"] > 1e-9 or m["serving_requests_completed"] != batch:
        return ("-", "-")
    return (m["serving_ttft_mean_s"] * 1e3, m["serving_tpot_mean_s"] * 1e3)


def main():
    build = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("--") else "build"
    mlsim = os.path.join(build, "cli", "mlsim")
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        # Why the 8192 column takes another model: Llama-2-70B refuses the prompt (its context).
        m = run_point(mlsim, tmp, GPUS[0][0], 8, 1, 8192, "llama-2-70b", metrics=True)
        if m["serving_requests_rejected_context"] != 1:
            sys.exit("expected llama-2-70b to refuse an 8192-token prompt (context 4096)")
        for gpu, short in GPUS:
            for tp in TPS:
                rows = {}
                for batch in BATCHES:
                    for prompt, model in PROMPTS:
                        rows[(batch, prompt)] = run_point(mlsim, tmp, gpu, tp, batch, prompt, model)
                if all(v is None for v in rows.values()):
                    lines.append(f"\n{short} TP {tp}: the weights do not fit.\n")
                    continue
                lines.append(f"\n{short} ({gpu}), TP {tp}: prefill (TTFT) / decode (TPOT) in ms\n")
                lines.append("| batch | " + " | ".join(
                    f"prompt {p}" + ("" if model == "llama-2-70b" else f" ({model})") for p, model in PROMPTS) + " |")
                lines.append("|---|" + "---|" * len(PROMPTS))
                for batch in BATCHES:
                    cells = []
                    for prompt, _ in PROMPTS:
                        v = rows[(batch, prompt)]
                        if v is None or v[0] == "-":
                            cells.append("-")
                        else:
                            cells.append(f"{v[0]:.1f} / {v[1]:.2f}")
                    lines.append(f"| {batch} | " + " | ".join(cells) + " |")
                print("\n".join(lines[-(len(BATCHES) + 3):]), flush=True)
    text = "\n".join(lines) + "\n"
    if "--out" in sys.argv:
        with open(sys.argv[sys.argv.index("--out") + 1], "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
