#!/usr/bin/env python3
"""The adversarial battery of issue 17: bad and extreme inputs against every shipped scenario.

    tools/adversarial_battery.py [--mlsim build/cli/mlsim] [--out results/adversarial]
                                 [--timeout 120] [--max-events 2000000] [--docs docs/robustness.md]

Cases come from two places:
  * mutations of every shipped scenario (workloads/scenarios/*.json): for each value the file
    gives (skipping annotations), a wrong type, a missing unit, an empty or overflowing value, an
    unknown sibling key (all of which must be rejected), and extreme numbers (-1, 0, 1e300) and
    negative quantities (which may be accepted or rejected, but must not crash, hang, fail
    internally or leave files);
  * the defects the issue lists, written out by hand.
Each case runs `mlsim validate` (for cases that must be rejected) or `mlsim run --max-events N`
(for the others) in a fresh output folder, with a timeout. Outcomes:
  rejected  exit 2 with "error: ..."              ok      exit 0 with summary.json
  limit     exit 1 "the run stopped" (a budget)   internal exit 1 "internal error" (a bug)
  crash     killed by a signal / other status     hang    past the timeout
  debris    a failed run left files behind
A case fails when its outcome is internal, crash, hang or debris, or when a must-reject case is
accepted ("nonsense accepted"). Writes cases.csv and summary.json to --out and the table between
the markers in --docs. Exit status 0 when no case fails.
"""
import argparse
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "workloads" / "scenarios"
UNIT_RE = re.compile(r"^\s*(-?[0-9.]+(?:e[+-]?[0-9]+)?)\s*([A-Za-z/]+)\s*$")
SKIP_SECTIONS = {"name", "description", "output", "variants", "include", "seed", "comment"}
MAX_LEAVES_PER_SCENARIO = 8  # [assumed] keeps the battery to minutes; leaves are taken in order


def leaves(doc, path=""):
    """(path, value) of every value the file gives, annotations and list bodies past [1] skipped."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            if k.startswith("_") or k == "comment":
                continue
            if not path and k in SKIP_SECTIONS:
                continue
            yield from leaves(v, f"{path}.{k}" if path else k)
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:1]):
            yield from leaves(v, f"{path}[{i}]")
    else:
        yield path, doc


def objects(doc, path=""):
    """Paths of the objects where an unknown key can be added (not inside variants or output)."""
    if isinstance(doc, dict):
        if path:
            yield path
        for k, v in doc.items():
            if k.startswith("_") or (not path and k in SKIP_SECTIONS):
                continue
            yield from objects(v, f"{path}.{k}" if path else k)
    elif isinstance(doc, list) and doc:
        yield from objects(doc[0], f"{path}[0]")


def mutations(path, value):
    """(override value as JSON, expectation, what) for one leaf."""
    if isinstance(value, bool):
        return [('"yes"', "reject", "a string for a boolean"), ("3", "reject", "a number for a boolean")]
    if isinstance(value, (int, float)):
        return [
            ('"abc"', "reject", "a word for a number"),
            ("[]", "reject", "a list for a number"),
            ("{}", "reject", "an object for a number"),
            ("-1", "any", "-1"),
            ("0", "any", "0"),
            ("1e300", "any", "1e300"),
        ]
    if isinstance(value, str):
        m = UNIT_RE.match(value)
        if m:
            unit = m.group(2)
            return [
                (m.group(1) if m.group(1) not in ("", "-") else "5", "reject",
                 "the unit left out"),
                (f'"1e400{unit}"', "reject", "a value past the double range"),
                (f'"abc{unit}"', "reject", "a word with the unit"),
                (f'"-5{unit}"', "any", "a negative quantity"),
                (f'"0{unit}"', "any", "zero"),
                (f'"9223372036854775807{unit}"', "any", "2^63-1 in the unit"),
            ]
        return [('"no-such-choice-zz"', "reject", "an unknown name"), ("17", "reject",
                                                                         "a number for a name")]
    return []


def scenario_cases(max_leaves):
    cases = []
    for file in sorted(SCENARIOS.glob("*.json")):
        doc = json.loads(file.read_text())
        model = doc.get("system", {}).get("model", "?")
        rel = file.relative_to(ROOT)
        taken = 0
        for path, value in leaves(doc):
            if path in ("system.model",):
                continue
            muts = mutations(path, value)
            if not muts:
                continue
            taken += 1
            if taken > max_leaves:
                break
            for new, expect, what in muts:
                cases.append(dict(model=model, scenario=str(rel), args=["--set", f"{path}={new}"],
                                  expect=expect, what=f"{path}: {what}"))
        for obj in list(objects(doc))[:4]:
            cases.append(dict(model=model, scenario=str(rel),
                              args=["--set", f"{obj}.no_such_key_zz=1"], expect="reject",
                              what=f"{obj}: an unknown key"))
    return cases


def defect_cases():
    """The issue's defects (and neighbours), by hand."""
    q = "workloads/scenarios/quickstart.json"
    ina = "workloads/scenarios/ina_dsa_study.json"
    cs = "workloads/scenarios/commsched_bytescheduler.json"
    cl = "workloads/scenarios/cluster_sing.json"
    vgg = "workloads/scenarios/pipeline_vgg16_dynamic.json"
    jobs = ('workload.jobs=[{"model":"resnet50","profile":"../dnn/pipedream/resnet50/graph.txt",'
            '"workers":4,"iterations":2},{"model":"alexnet","profile":'
            '"../dnn/pipedream/alexnet/graph.txt","workers":4,"iterations":2}]')
    c = [
        ("collectives", q, ["--set", "topology.host_link.latency=9223372036854775807ns"], "any",
         "defect 1: latency of 2^63-1 ns (wrapped before)"),
        ("collectives", q, ["--set", "topology.host_link.latency=9223372036s"], "any",
         "defect 1: latency of 9.2e9 s"),
        ("collectives", q, ["--set", "topology.host_link.bandwidth=1e-3bps"], "any",
         "defect 1: bandwidth of 1e-3 bps"),
        ("ina", ina, ["--variant", "switchml", "--set", "system.loss_rate=0.01", "--set", jobs],
         "any", "defect 2: SwitchML with loss and two short jobs"),
        ("collectives", q, ["--set", "_x" + ".a" * 20000 + "=1"], "reject",
         "defect 4: --set path 20000 levels deep"),
        ("commsched", cs, ["--set", "system.partition=1"], "any",
         "defect 5: partition of one parameter"),
        ("cluster", cl, ["--set", 'events={"random_failures":{"mtbf":"1ns","repair":"1ns",'
                         '"until":"1h"}}'], "any", "defect 5: failures every nanosecond"),
        ("collectives", q, ["--out", "/proc/x"], "reject", "defect 6: --out under /proc"),
        ("collectives", q, ["--out", ""], "reject", "defect 6: --out empty"),
        ("collectives", q, ["--set", "seed=-1"], "reject", "a negative seed"),
        ("collectives", q, ["--variant", "no_such_variant"], "reject", "an unknown variant"),
        ("collectives", q, ["--set", "events.list=[{\"at\":\"-1s\",\"all_links\":true,"
                            "\"bandwidth\":\"1Gbps\"}]"], "reject", "an event before time 0"),
        ("collectives", q, ["--set", "events.list=[{\"all_links\":true,\"bandwidth\":\"0Gbps\"}]"],
         "reject", "a link bandwidth of zero"),
        ("collectives", q, ["--set", "events.list=[{\"host\":99,\"speed\":2}]"], "reject",
         "an event on a host that does not exist"),
        ("collectives", q, ["--max-events", "0"], "reject", "an event budget of zero"),
        ("collectives", q, ["--max-memory", "lots"], "reject", "a memory budget without a size"),
        ("collectives", q, ["--set", "system.chunks=4096", "--max-events", "1000"], "any",
         "a run past its event budget"),
        ("pipeline", vgg, ["--variant", "autopipe_static", "--set",
                           'system.memory={"constraint":true,"capacity":"4GiB"}'], "reject",
         "GPU memory in which no configuration fits (mlsim's accounting)"),
        ("pipeline", vgg, ["--variant", "pipedream_straight_static", "--set",
                           'system.memory={"constraint":true,"capacity":"1GiB"}'], "reject",
         "GPU memory in which no configuration passes PipeDream's check"),
        ("pipeline", vgg, ["--set", 'system.memory={"constraint":true,"capacty":"16GiB"}'],
         "reject", "an unknown key under system.memory"),
        ("pipeline", vgg, ["--set", 'system.memory={"constraint":true,"capacity":"lots"}'],
         "reject", "a GPU memory without a size"),
        ("pipeline", vgg, ["--set", 'system.memory={"constraint":false,"capacity":"16GiB"}'],
         "reject", "a GPU memory given with the constraint off"),
        ("pipeline", vgg, ["--set", 'system.memory={"capacity":"16GiB"}'], "reject",
         "system.memory without its constraint switch"),
        ("pipeline", vgg, ["--variant", "autopipe_rl", "--set",
                           'system.memory={"constraint":true,"capacity":"12GiB"}'], "any",
         "the RL planner re-planning under a binding memory limit"),
        ("pipeline", vgg, ["--variant", "pipedream", "--set",
                           'system.memory={"constraint":true,"capacity":"1GiB"}'], "any",
         "PipeDream's check with 1 GiB (its data-parallel configuration always passes)"),
    ]
    return [dict(model=m, scenario=s, args=a, expect=e, what=w) for m, s, a, e, w in c]


def classify(rc, err, timed_out, debris):
    if timed_out:
        return "hang"
    if debris:
        return "debris"
    if rc == 0:
        return "ok"
    if rc == 2 and err.startswith("error:"):
        return "rejected"
    if rc == 1 and "the run stopped" in err:
        return "limit"
    if rc == 1 and "internal error" in err:
        return "internal"
    return "crash"


def run_case(case, mlsim, timeout, max_events, scratch):
    out = Path(scratch) / "out"
    shutil.rmtree(out, ignore_errors=True)
    args = list(case["args"])
    explicit_out = "--out" in args
    if case["expect"] == "reject":
        sub = "validate"
        if explicit_out:  # --out belongs to run
            sub = "run"
    else:
        sub = "run"
    cmd = [mlsim, sub, str(ROOT / case["scenario"])] + args
    if sub == "run":
        if not explicit_out:
            cmd += ["--out", str(out)]
        if "--max-events" not in args:
            cmd += ["--max-events", str(max_events)]
        cmd += ["--quiet"]
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
        rc, err, timed_out = p.returncode, p.stderr, False
    except subprocess.TimeoutExpired:
        rc, err, timed_out = None, "", True
    seconds = time.monotonic() - t0
    debris = rc not in (0, None) and not explicit_out and out.exists() and any(out.iterdir())
    outcome = classify(rc, err, timed_out, debris)
    bad = outcome in ("internal", "crash", "hang", "debris") or (
        case["expect"] == "reject" and outcome != "rejected")
    return dict(case, command=sub, status="" if rc is None else rc, outcome=outcome,
                verdict="FAIL" if bad else "pass", seconds=round(seconds, 2),
                message=err.strip().splitlines()[-1][:300] if err.strip() else "")


def table(rows):
    models = sorted({r["model"] for r in rows})
    lines = ["| model | cases | rejected | ran (ok) | stopped at a budget | failed |",
             "|---|---|---|---|---|---|"]
    for m in models + ["all"]:
        rs = [r for r in rows if m == "all" or r["model"] == m]
        count = lambda o: sum(1 for r in rs if r["outcome"] == o)
        fails = sum(1 for r in rs if r["verdict"] == "FAIL")
        name = f"**{m}**" if m == "all" else m
        lines.append(f"| {name} | {len(rs)} | {count('rejected')} | {count('ok')} | "
                     f"{count('limit')} | {fails} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mlsim", default=str(ROOT / "build/cli/mlsim"))
    ap.add_argument("--out", default=str(ROOT / "results/adversarial"))
    ap.add_argument("--docs", default=str(ROOT / "docs/robustness.md"))
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--max-events", type=int, default=2_000_000)
    ap.add_argument("--max-leaves", type=int, default=MAX_LEAVES_PER_SCENARIO)
    a = ap.parse_args()
    cases = defect_cases() + scenario_cases(a.max_leaves)
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for i, c in enumerate(cases, 1):
            r = run_case(c, a.mlsim, a.timeout, a.max_events, scratch)
            rows.append(r)
            if r["verdict"] == "FAIL":
                print(f"FAIL [{r['outcome']}] {r['scenario']} {' '.join(r['args'])[:160]}: "
                      f"{r['message']}", file=sys.stderr)
            if i % 25 == 0:
                print(f"{i}/{len(cases)} cases", file=sys.stderr)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    fields = ["model", "scenario", "what", "args", "expect", "command", "status", "outcome",
              "verdict", "seconds", "message"]
    with open(out / "cases.csv.tmp", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow(dict(r, args=" ".join(r["args"])[:300]))
    os.replace(out / "cases.csv.tmp", out / "cases.csv")
    fails = [r for r in rows if r["verdict"] == "FAIL"]
    summary = dict(cases=len(rows), failed=len(fails),
                   outcomes={o: sum(1 for r in rows if r["outcome"] == o)
                             for o in ("rejected", "ok", "limit", "internal", "crash", "hang",
                                       "debris")})
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    docs = Path(a.docs)
    if docs.exists():
        text = docs.read_text()
        begin, end = "<!-- battery:begin -->", "<!-- battery:end -->"
        if begin in text and end in text:
            body = table(rows)
            if fails:
                body += "\n\nFailing cases:\n\n" + "\n".join(
                    f"* `{r['scenario']}` {r['what']}: {r['outcome']} ({r['message'][:200]})"
                    for r in fails)
            text = text[:text.index(begin) + len(begin)] + "\n" + body + "\n" + text[text.index(end):]
            docs.write_text(text)
    print(json.dumps(summary))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
