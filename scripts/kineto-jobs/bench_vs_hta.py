#!/usr/bin/env python3
"""bench_vs_hta.py — rankscope against Holistic Trace Analysis on the same real CPU/Gloo traces.

Is: a benchmark that prints numbers. It runs a real 8-rank DDP job (the straggler_range job of
make_traces.py: Gloo, CPU, record_shapes, rank 2 slowed in `forward`) for 30 traced steps, keeps the
traces as Kineto writes them (plain JSON, in a temporary folder, never committed), then times, each
in its own process (wall seconds, peak RSS from wait4):
  rankscope import-kineto DIR -o RUN, then rankscope skew RUN   (the import and the whole report)
  HTA's TraceAnalysis(trace_dir=DIR)                             (HTA loading its traces: on CPU
                                                                  traces every analysis HTA has
                                                                  wants GPU kernels and answers none)
Is not: a test (it asserts nothing; CI never runs it: it needs PyTorch and HTA from PyPI).

    <venv>/bin/python scripts/kineto-jobs/bench_vs_hta.py build/bin            # make traces, time both
    <venv>/bin/python scripts/kineto-jobs/bench_vs_hta.py build/bin --traces DIR  # traces already made

<venv> holds torch and HolisticTraceAnalysis (`pip install torch HolisticTraceAnalysis`).
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def make_traces(out, ranks, steps):
    sys.path.insert(0, HERE)
    import make_traces as mt          # noqa: E402  (the job and its profiler settings)
    import torch.multiprocessing as mp
    cfg = dict(mt.SMALL, straggler=2, extra_matmuls=24, world=ranks, steps=steps)
    t0 = time.time()
    mp.spawn(mt.worker, args=(cfg, out, mt.free_port()), nprocs=ranks, join=True)
    print(f"job: {ranks} ranks x {steps} traced steps in {time.time() - t0:.1f} s", flush=True)


def timed(argv):
    """Wall seconds and peak RSS (MB) of one child process; raises when it fails. The peak counts
    from this process's own at the fork (tens of MB: torch is never imported here)."""
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    err = proc.stderr.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{argv[0]} failed: {err.strip()[-400:]}")
    return wall, usage.ru_maxrss / 1024.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bin_dir", help="the folder holding rankscope (build/bin)")
    ap.add_argument("--traces", help="a folder of traces already made (else a job makes them)")
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--repeat", type=int, default=3, help="runs of each; the fastest is printed")
    a = ap.parse_args()
    rankscope = os.path.join(os.path.abspath(a.bin_dir), "rankscope")
    if not os.access(rankscope, os.X_OK):
        sys.exit(f"bench_vs_hta: {a.bin_dir}: no rankscope there")
    with tempfile.TemporaryDirectory(prefix="rs-vs-hta-") as tmp:
        traces = a.traces or os.path.join(tmp, "traces")
        if not a.traces:
            os.makedirs(traces)
            # In a process of its own: Linux keeps a process's peak RSS across exec, so every command
            # this one forks would start from torch's few hundred MB (and read as using them).
            subprocess.run([sys.executable, "-c", "import sys, bench_vs_hta as b; "
                            "b.make_traces(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))",
                            traces, str(a.ranks), str(a.steps)], cwd=HERE, check=True)
        files = [f for f in os.listdir(traces) if f.endswith(".json") or f.endswith(".json.gz")]
        size = sum(os.path.getsize(os.path.join(traces, f)) for f in files)
        print(f"traces: {len(files)} files, {size / 1e6:.0f} MB, {traces}")
        run = os.path.join(tmp, "run")
        ours, theirs = [], []
        for _ in range(a.repeat):
            subprocess.run(["rm", "-rf", run], check=True)
            imp = timed([rankscope, "import-kineto", traces, "-o", run])
            skew = timed([rankscope, "skew", run])
            ours.append((imp[0] + skew[0], max(imp[1], skew[1]), imp[0], skew[0]))
            theirs.append(timed([sys.executable, "-c",
                                 "import sys; from hta.trace_analysis import TraceAnalysis; "
                                 "TraceAnalysis(trace_dir=sys.argv[1])", traces]))
        o, h = min(ours), min(theirs)
        print(f"{'':28} {'seconds':>8} {'peak MB':>8}")
        print(f"{'rankscope import + skew':28} {o[0]:8.2f} {o[1]:8.0f}   (import {o[2]:.2f} s, skew {o[3]:.2f} s)")
        print(f"{'HTA TraceAnalysis (load)':28} {h[0]:8.2f} {h[1]:8.0f}")
        print(f"rankscope is {h[0] / o[0]:.1f}x faster and uses {h[1] / o[1]:.1f}x less memory "
              f"(fastest of {a.repeat} runs each)")


if __name__ == "__main__":
    main()
