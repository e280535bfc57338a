#!/usr/bin/env python3
"""PyTorch's fr_trace and NVIDIA's FR attribution on every run of the real-job corpus, graded.

For each tests/fixtures/torch-jobs/<run>/ with dumps/, runs
  fr_trace DUMPS                              (torch.distributed.flight_recorder.fr_trace)
  fr_trace --allow-incomplete-ranks DUMPS
  NVRx fr_attribution --fr-path DUMPS -p 'comm_lib_trace_rank_*' --emit-stdout   (with --nvrx-src)
and grades each answer against the run's truth.json the way hang_torch_jobs_test.cpp grades
hangdoctor's: abort (a Python exception ended it), false alarm (a report on a healthy run), right
(no report on a healthy run; a faulty run's culprit named, alone), ambiguous (named among others),
wrong (a report that does not name it, or no report on a faulty run). A run without dumps has
nothing for these tools: "no input". Prints a markdown table per run and the totals.

  python scripts/torch-jobs/grade_oracles.py [--nvrx-src <nvidia-resiliency-ext>/src] [RUN_DIR...]

PYTHON must be a venv's python with torch 2.15 (which carries fr_trace). NVRx's attribution is only
in its repository's src/ (the PyPI release has no attribution package); run it from there.
"""
import argparse
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "..", "tests", "fixtures", "torch-jobs")


def run(cmd, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    return p.returncode, p.stdout + p.stderr


def named_ranks(text):
    """The ranks a tool's answer blames: fr_trace's "missing ranks"/"culprit" lines, NVRx's table."""
    ranks = set()
    for m in re.finditer(r"(?:[Mm]issing [Rr]anks?|missed FR dumps from ranks|culprit ranks?)\D{0,20}\{?\(?\[?([\d, ]+)", text):
        ranks.update(int(x) for x in re.findall(r"\d+", m.group(1)))
    return ranks


def grade(rc, text, truth):
    if "Traceback (most recent call last)" in text:
        last = [l for l in text.splitlines() if l.strip()][-1]
        return "abort", last.strip()[:90]
    reports = re.search(r"Not all ranks joining|mismatch|Missing Ranks|missed FR dumps", text)
    named = named_ranks(text)
    if truth["verdict"] == "healthy":
        return ("false alarm", f"names {sorted(named)}") if reports and named else ("right", "no report")
    culprits = set(truth["culprits"])
    if named == culprits:
        return "right", f"names {sorted(named)}"
    if culprits <= named:
        return "ambiguous", f"names {sorted(named)}"
    return "wrong", f"names {sorted(named)}" if named else "no culprit named"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="*")
    ap.add_argument("--nvrx-src")
    args = ap.parse_args()
    runs = args.runs or sorted(os.path.join(CORPUS, d) for d in os.listdir(CORPUS)
                               if os.path.exists(os.path.join(CORPUS, d, "truth.json")))
    py = sys.executable
    tools = [("fr_trace", lambda d: [py, "-m", "torch.distributed.flight_recorder.fr_trace", d], None),
             ("fr_trace --allow-incomplete-ranks",
              lambda d: [py, "-m", "torch.distributed.flight_recorder.fr_trace", "--allow-incomplete-ranks", d], None)]
    if args.nvrx_src:
        tools.append(("NVRx fr_attribution",
                      lambda d: [py, "-m", "nvidia_resiliency_ext.attribution.trace_analyzer.fr_attribution",
                                 "--fr-path", d, "-p", "comm_lib_trace_rank_*", "--emit-stdout"],
                      dict(os.environ, PYTHONPATH=args.nvrx_src)))
    totals = {t[0]: {} for t in tools}
    print("| run | truth | " + " | ".join(t[0] for t in tools) + " |")
    print("|---|---|" + "---|" * len(tools))
    for r in runs:
        truth = json.load(open(os.path.join(r, "truth.json")))
        dumps = os.path.join(r, "dumps")
        cells = []
        for name, cmd, env in tools:
            if not os.path.isdir(dumps):
                g, why = "no input", "no dumps"
            else:
                g, why = grade(*run(cmd(dumps), env), truth)
            totals[name][g] = totals[name].get(g, 0) + 1
            cells.append(f"{g}: {why}")
        t = "healthy" if truth["verdict"] == "healthy" else "rank " + ",".join(map(str, truth["culprits"]))
        print(f"| {os.path.basename(os.path.normpath(r))} | {t} | " + " | ".join(cells) + " |")
    print()
    for name, counts in totals.items():
        print(f"{name}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))


if __name__ == "__main__":
    main()
