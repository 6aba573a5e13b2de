#!/usr/bin/python3
"""tools/plot.py on real mlsim outputs: every figure is written, latency axes carry their unit and
every line or bar is labelled with the run (variant) it comes from.

Usage: plot_test.py MLSIM_BINARY SOURCE_DIR (registered in tests/CMakeLists.txt as a ctest, run by
Debian's /usr/bin/python3 as plot.py's first line is; skipped without matplotlib).
Runs `mlsim compare` on workloads/scenarios/mfs_llama2.json (two variants, under a second) and
`mlsim sweep` over two points of the Azure conversation scenario cut to 40 requests, then plots
each output with the command a user would type, and once more through plot.py's functions with
`save` replaced, to read the axes' labels and legends.
"""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def check_png(path):
    if not os.path.exists(path):
        fail(f"{path} was not written")
    with open(path, "rb") as f:
        if f.read(8) != b"\x89PNG\r\n\x1a\n":
            fail(f"{path} is not a PNG")
    if os.path.getsize(path) < 2000:
        fail(f"{path} is too small to hold a figure ({os.path.getsize(path)} bytes)")


def main():
    mlsim, source = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    if importlib.util.find_spec("matplotlib") is None:
        print("skipped: no matplotlib for this python3 (Debian's python3-matplotlib)")
        sys.exit(77)  # ctest's SKIP_RETURN_CODE
    plot_py = os.path.join(source, "tools", "plot.py")
    with tempfile.TemporaryDirectory() as tmp:
        cmp_dir = os.path.join(tmp, "cmp")
        subprocess.run([mlsim, "compare", os.path.join(source, "workloads/scenarios/mfs_llama2.json"),
                        "--out", cmp_dir], check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(cmp_dir, "compare.json")) as f:
            variants = json.load(f)["variants"]
        if sorted(variants) != ["mfs", "separate"]:
            fail(f"unexpected variants {variants}")

        figures = os.path.join(tmp, "figures")
        subprocess.run([plot_py, "compare", cmp_dir, "--out", figures], check=True,
                       stdout=subprocess.DEVNULL)
        check_png(os.path.join(figures, "compare_metrics.png"))
        for name in ("serving_e2e_cdf", "serving_ttft_cdf", "serving_tpot_cdf"):
            check_png(os.path.join(figures, f"compare_{name}.png"))

        summaries = [os.path.join(cmp_dir, "variants", v, "summary.json") for v in variants]
        subprocess.run([plot_py, "cdf", *summaries, "--out", figures], check=True,
                       stdout=subprocess.DEVNULL)
        check_png(os.path.join(figures, "cdf_serving_ttft_cdf.png"))

        sweep_file = os.path.join(tmp, "overhead.json")
        with open(sweep_file, "w") as f:
            json.dump({"scenario": os.path.join(source, "workloads/scenarios/serving_azure_conv_70b.json"),
                       "variants": ["continuous"], "set": {"workload.limit": 40},
                       "grid": {"system.iteration_overhead": ["0s", "5ms"]}}, f)
        sweep_dir = os.path.join(tmp, "sweep")
        subprocess.run([mlsim, "sweep", sweep_file, "--out", sweep_dir], check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run([plot_py, "sweep", os.path.join(sweep_dir, "sweep.csv"),
                        "--out", figures], check=True, stdout=subprocess.DEVNULL)
        swept = [p for p in os.listdir(figures) if p.startswith("sweep_")]
        if not swept:
            fail("the sweep gave no figure")
        for p in swept:
            check_png(os.path.join(figures, p))

        # The labels: load plot.py as a module and keep each figure's axes instead of a file.
        spec = importlib.util.spec_from_file_location("plot", plot_py)
        plot = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(plot)
        drawn = []

        def keep(fig, path):
            axes = [(a.get_xlabel(), a.get_ylabel(),
                     [t.get_text() for t in a.get_legend().get_texts()] if a.get_legend() else [])
                    for a in fig.axes]
            drawn.append((os.path.basename(path), axes))
            plot.plt.close(fig)

        plot.save = keep
        plot.cmd_cdf(type("Args", (), {"input": summaries, "out": figures})())
        if not drawn:
            fail("cmd_cdf drew nothing")
        for name, axes in drawn:
            for xlabel, ylabel, legend in axes:
                if name.startswith("cdf_serving_") and not xlabel.endswith("(s)"):
                    fail(f"{name}: x axis '{xlabel}' does not give its unit (s)")
                if ylabel != "cumulative fraction":
                    fail(f"{name}: y axis '{ylabel}'")
                if sorted(legend) != sorted(variants):
                    fail(f"{name}: legend {legend} does not name the runs {variants}")
        print(f"ok: {len(drawn)} CDF figures labelled, {len(swept)} sweep figures")


if __name__ == "__main__":
    main()
