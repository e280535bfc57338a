#!/usr/bin/env python3
"""make_traces.py — real PyTorch profiler (Kineto) traces of small CPU/Gloo jobs, kept as fixtures.

Is: the maker of tests/fixtures/kineto/real-cpu/. Each scenario is a real 4-rank job (Gloo, DDP,
torch.multiprocessing), every rank traced by torch.profiler (CPU activity, record_shapes, schedule
wait=1 warmup=1 active=STEPS) and exported with `export_chrome_trace("rank<R>.json")` (a relative
name: Kineto copies it into `traceName`), then gzipped to rank<R>.json.gz after any machine path or
the host name is replaced ("<venv>", "<work>", "<host>"). A truth.json says what the job is.
Is not: run by the tests (they read the committed traces), or a GPU job.

    python make_traces.py OUT_DIR [SCENARIO ...]     # all five when none is named
    python make_traces.py OUT_DIR --check-only [SCENARIO ...]   # only re-read and check

Scenarios (README.md beside this file says more):
  straggler_range  rank 2 runs ~40 ms of extra matmuls inside `forward` only
  throttled_rank   rank 1 is held to ~half a CPU (SIGSTOP/SIGCONT duty cycle, as a CFS quota does)
  seqlen           base/ T=128, new/ T=512, one attention model (scaled_dot_product_attention)
  bucket           base/ DDP bucket_cap_mb=25, new/ bucket_cap_mb=1, a ~4.2 M-parameter MLP
  no_ranges        DDP training with no record_function of its own
"""
import argparse
import contextlib
import gzip
import json
import os
import re
import socket
import subprocess
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.profiler import ProfilerActivity, profile, record_function, schedule

WORLD = 4
STEPS = 5            # active (traced) steps, after one wait and one warm-up step
RANGES = ("data", "forward", "backward", "optimizer")

# One transformer-like block model for straggler_range, throttled_rank and no_ranges.
SMALL = dict(model="block", d=64, heads=4, layers=2, T=64, batch=4)

SCENARIOS = {
    "straggler_range": {
        "runs": {"": dict(SMALL, straggler=2, extra_matmuls=24)},
        "truth": {"straggler": 2, "class": "compute", "range": "forward",
                  "cause": "rank 2 runs 24 extra chained 256x256 matmuls inside `forward` only (+26 ms a step in the committed run)"},
    },
    "throttled_rank": {
        "runs": {"": dict(SMALL, throttle=1, stop_ms=4.0, run_ms=2.0)},
        "truth": {"straggler": 1, "class": "compute", "kind": "uniform slowdown",
                  "cause": "rank 1 is held to ~1/3 of a CPU (SIGSTOP 4 ms / SIGCONT 2 ms, "
                           "as a CFS quota cpu.max=2000/6000 would); every range is slower, "
                           "its time is compute, not transfer"},
    },
    "seqlen": {
        "runs": {"base": dict(model="block", d=32, heads=2, layers=2, T=128, batch=4),
                 "new": dict(model="block", d=32, heads=2, layers=2, T=512, batch=4)},
        "truth": {"pair": "seqlen", "base_T": 128, "new_T": 512,
                  "cause": "sequence length x4, everything else equal; attention "
                           "(forward/attention, scaled_dot_product_attention) dominates the growth"},
    },
    "bucket": {
        "runs": {"base": dict(model="mlp", width=512, layers=16, batch=8, bucket_cap_mb=25),
                 "new": dict(model="mlp", width=512, layers=16, batch=8, bucket_cap_mb=1)},
        "truth": {"pair": "bucket", "base_bucket_cap_mb": 25, "new_bucket_cap_mb": 1,
                  "params": None,
                  "cause": "DDP bucket_cap_mb 25 -> 1: the same bytes in many more gloo:all_reduce calls"},
    },
    "no_ranges": {
        "runs": {"": dict(SMALL, no_ranges=True)},
        "truth": {"straggler": None, "class": None, "range": None, "healthy": True,
                  "cause": "healthy DDP job with no record_function of its own"},
    },
}


# --------------------------------------------------------------------------------------------
# the job

class Block(nn.Module):
    """Pre-norm attention + MLP; nested ranges forward/attention and forward/mlp unless ranges off."""

    def __init__(self, d, heads, ranges):
        super().__init__()
        self.heads, self.ranges = heads, ranges
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def rf(self, name):
        return record_function(name) if self.ranges else contextlib.nullcontext()

    def forward(self, x):
        B, T, D = x.shape
        with self.rf("forward/attention"):
            q, k, v = self.qkv(self.ln1(x)).split(D, dim=-1)
            q, k, v = (t.reshape(B, T, self.heads, D // self.heads).transpose(1, 2) for t in (q, k, v))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(B, T, D))
        with self.rf("forward/mlp"):
            x = x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
        return x



# The folder above the checkout: machine paths in a trace start there.
WORK_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

def build(cfg, ranges):
    if cfg["model"] == "block":
        return nn.Sequential(*[Block(cfg["d"], cfg["heads"], ranges) for _ in range(cfg["layers"])])
    layers = []
    for _ in range(cfg["layers"]):
        layers += [nn.Linear(cfg["width"], cfg["width"]), nn.ReLU()]
    return nn.Sequential(*layers)


def batch_of(cfg, gen):
    if cfg["model"] == "block":
        x = torch.randn(cfg["batch"], cfg["T"], cfg["d"], generator=gen)
    else:
        x = torch.randn(cfg["batch"], cfg["width"], generator=gen)
    x = (x - x.mean(dim=-1, keepdim=True)) / (x.std(dim=-1, keepdim=True) + 1e-5)
    return x, torch.roll(x, 1, dims=-1) * 0.5


THROTTLER = r"""
import os, signal, sys, time
pid, stop, run = int(sys.argv[1]), float(sys.argv[2]) / 1e3, float(sys.argv[3]) / 1e3
done = []
signal.signal(signal.SIGTERM, lambda *a: done.append(1))
try:
    while not done:
        os.kill(pid, signal.SIGSTOP); time.sleep(stop)
        os.kill(pid, signal.SIGCONT); time.sleep(run)
except ProcessLookupError:
    pass
finally:
    try: os.kill(pid, signal.SIGCONT)
    except ProcessLookupError: pass
"""


def worker(rank, cfg, run_dir, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    # 4 ranks on a 2-core VM: two ranks share each core (0,2 on one, 1,3 on the other), so every
    # rank gets the same half of a core; left free, the kernel pairs them differently per run.
    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpus[rank % len(cpus)]})
    torch.manual_seed(0)                     # the same weights on every rank
    world, steps = cfg.get("world", WORLD), cfg.get("steps", STEPS)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    ranges = not cfg.get("no_ranges")
    rf = (lambda n: record_function(n)) if ranges else (lambda n: contextlib.nullcontext())

    model = build(cfg, ranges)
    ddp_kw = {"bucket_cap_mb": cfg["bucket_cap_mb"]} if "bucket_cap_mb" in cfg else {}
    model = DDP(model, **ddp_kw)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    gen = torch.Generator().manual_seed(1000 + rank)
    extra = cfg.get("extra_matmuls", 0) if cfg.get("straggler") == rank else 0
    ballast = torch.randn(256, 256, generator=gen) / 16.0

    throttler = None
    if cfg.get("throttle") == rank:
        throttler = subprocess.Popen([sys.executable, "-c", THROTTLER, str(os.getpid()),
                                      str(cfg["stop_ms"]), str(cfg["run_ms"])])

    os.chdir(run_dir)                        # a relative export name: no machine path in traceName
    path = f"rank{rank}.json"
    prof = profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                   schedule=schedule(wait=1, warmup=1, active=steps),
                   on_trace_ready=lambda p: p.export_chrome_trace(path))
    dist.barrier()
    with prof:
        for _ in range(steps + 2):
            with rf("data"):
                x, y = batch_of(cfg, gen)
            with rf("forward"):
                out = model(x)
                loss = F.mse_loss(out, y)
                if extra:
                    z = ballast
                    for _ in range(extra):
                        z = torch.tanh(z @ ballast)
                    loss = loss + 0.0 * z.mean()
            with rf("backward"):
                loss.backward()
            with rf("optimizer"):
                opt.step()
                opt.zero_grad(set_to_none=True)
            prof.step()
    if throttler is not None:
        throttler.terminate()
        throttler.wait()
    dist.barrier()
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------------------------
# after the job: no machine path or host name, then gzip

def scrub(text):
    host = socket.gethostname()
    venv = sys.prefix
    text = text.replace(venv, "<venv>")
    # the folder that holds the checkout (and often the venv): any path below it
    text = re.sub(re.escape(WORK_ROOT) + r"/[^\s\"']*", "<work>", text)
    home = os.path.expanduser("~")
    if len(home) > 1 and home != WORK_ROOT:
        text = text.replace(home, "<home>")
    # the host name as a whole word inside a string (it may be short, e.g. "vm")
    text = re.sub(r'(?<![A-Za-z0-9_.-])' + re.escape(host) + r'(?![A-Za-z0-9_-])', "<host>", text)
    return text


def finish(run_dir, world=WORLD):
    for r in range(world):
        raw = os.path.join(run_dir, f"rank{r}.json")
        with open(raw) as f:
            text = f.read()
        clean = scrub(text)
        json.loads(clean)
        with open(raw + ".gz", "wb") as f:
            with gzip.GzipFile(filename="", mode="wb", fileobj=f, compresslevel=9, mtime=0) as g:
                g.write(clean.encode())
        os.remove(raw)


def run_scenario(out, name):
    spec = SCENARIOS[name]
    truth = dict(spec["truth"])
    for sub, cfg in spec["runs"].items():
        run_dir = os.path.abspath(os.path.join(out, name, sub))
        os.makedirs(run_dir, exist_ok=True)
        for f in os.listdir(run_dir):
            if f.startswith("rank"):
                os.remove(os.path.join(run_dir, f))
        t0 = time.time()
        mp.spawn(worker, args=(cfg, run_dir, free_port()), nprocs=cfg.get("world", WORLD), join=True)
        finish(run_dir, cfg.get("world", WORLD))
        print(f"[{name}{'/' + sub if sub else ''}] ran in {time.time() - t0:.1f} s", flush=True)
        if "params" in truth:
            truth["params"] = sum(p.numel() for p in build(cfg, True).parameters())
    truth.update({"torch": torch.__version__.split("+")[0], "world": WORLD, "backend": "gloo",
                  "active_steps": STEPS, "machine": "2-core x86-64 VM, CPU only"})
    if len(spec["runs"]) == 1:
        truth["config"] = next(iter(spec["runs"].values()))
    else:
        truth["configs"] = spec["runs"]
    with open(os.path.join(out, name, "truth.json"), "w") as f:
        json.dump(truth, f, indent=1, sort_keys=True)
        f.write("\n")


# --------------------------------------------------------------------------------------------
# checks: load every trace and measure what the scenario says

def load(run_dir, r):
    with gzip.open(os.path.join(run_dir, f"rank{r}.json.gz"), "rt") as f:
        text = f.read()
    host = socket.gethostname()
    leaks = [s for s in (WORK_ROOT + "/", sys.prefix) if s in text]
    if re.search(r'(?<![A-Za-z0-9_.-])' + re.escape(host) + r'(?![A-Za-z0-9_-])', text):
        leaks.append("hostname")
    return json.loads(text), leaks


def summarize(run_dir):
    """Per rank: range means (ms), counts of cpu_op and gloo: events, gloo calls/step, MB/step."""
    out = []
    for r in range(WORLD):
        t, leaks = load(run_dir, r)
        ev = [e for e in t["traceEvents"] if e.get("ph") == "X"]
        steps = [e for e in ev if e["name"].startswith("ProfilerStep#")]
        nsteps = max(1, len(steps))
        s = {"rank": r, "leaks": leaks, "steps": len(steps),
             "step_ms": sum(e["dur"] for e in steps) / nsteps / 1e3,
             "cpu_op": sum(1 for e in ev if e.get("cat") == "cpu_op"),
             "events": len(t["traceEvents"]),
             "rank_in_trace": t.get("distributedInfo", {}).get("rank")}
        for name in RANGES + ("forward/attention", "forward/mlp", "DistributedDataParallel.forward",
                              "Optimizer.step#AdamW.step"):
            d = [e["dur"] for e in ev if e["name"] == name and e.get("cat") == "user_annotation"]
            s[name] = sum(d) / len(d) / 1e3 if d else None
        gl = [e for e in ev if e["name"].startswith("gloo:")]
        s["gloo"] = len(gl)
        ar = [e for e in gl if e["name"] == "gloo:all_reduce"]
        s["allreduce_per_step"] = len(ar) / nsteps
        nbytes = 0
        for e in ar:
            a = e.get("args", {})
            dims, types = a.get("Input Dims") or [], a.get("Input type") or []
            for dlist, ty in zip(dims, types):
                n = 1
                for x in (dlist or []):
                    n *= x
                nbytes += n * (4 if ty == "float" else 8 if ty in ("double", "long int") else 0) \
                    if dlist else 0
        s["MB_per_step"] = nbytes / nsteps / 2**20
        # cpu_op time inside the step not under gloo: compute (self-ish: top-level ops only)
        tops = top_level_ops(ev)
        s["compute_ms"] = sum(e["dur"] for e in tops if not e["name"].startswith(("gloo:", "c10d::")))\
            / nsteps / 1e3
        att = [e for e in ev if e.get("cat") == "cpu_op" and "attention" in e["name"].lower()]
        s["attention_op_ms"] = sum(e["dur"] for e in top_level_ops(att)) / nsteps / 1e3
        s["gloo_ms"] = sum(e["dur"] for e in ar) / nsteps / 1e3
        out.append(s)
    return out


def top_level_ops(ev):
    """cpu_op events not inside another of these events on the same thread."""
    res = []
    by_tid = {}
    for e in ev:
        if e.get("cat") == "cpu_op":
            by_tid.setdefault((e["pid"], e["tid"]), []).append(e)
    for lst in by_tid.values():
        lst.sort(key=lambda e: (e["ts"], -e["dur"]))
        end = -1
        for e in lst:
            if e["ts"] >= end:
                res.append(e)
                end = e["ts"] + e["dur"]
    return res


def fmt(v):
    return "-" if v is None else f"{v:.1f}" if isinstance(v, float) else str(v)


def check(out, name):
    spec = SCENARIOS[name]
    ok = True
    rows = []
    sums = {}
    for sub in spec["runs"]:
        run_dir = os.path.join(out, name, sub)
        sums[sub] = S = summarize(run_dir)
        for s in S:
            if s["leaks"] or s["steps"] != STEPS or s["cpu_op"] == 0 or s["rank_in_trace"] != s["rank"]:
                ok = False
                rows.append(f"  !! {name}/{sub} rank {s['rank']}: leaks={s['leaks']} steps={s['steps']} "
                            f"cpu_op={s['cpu_op']} distributedInfo.rank={s['rank_in_trace']}")
        print(f"\n{name}{'/' + sub if sub else ''}:")
        cols = ["rank", "events", "cpu_op", "gloo", "allreduce_per_step", "MB_per_step", "step_ms",
                "data", "forward", "backward", "optimizer", "forward/attention", "compute_ms", "attention_op_ms", "gloo_ms"]
        print("  " + " ".join(f"{c[:10]:>10}" for c in cols))
        for s in S:
            print("  " + " ".join(f"{fmt(s[c]):>10}" for c in cols))

    def others(S, r, key):
        v = [s[key] for s in S if s["rank"] != r]
        return sum(v) / len(v)

    verdict = []
    if name == "straggler_range":
        S = sums[""]
        f2, fo = S[2]["forward"], others(S, 2, "forward")
        rest = sum(max(0.0, S[2][k] - others(S, 2, k)) for k in ("data", "optimizer"))
        g2, go = S[2]["gloo_ms"], others(S, 2, "gloo_ms")
        good = f2 - fo > 20 and rest < (f2 - fo) / 4 and f2 > 1.5 * max(
            S[r]["forward"] for r in range(WORLD) if r != 2) and g2 < go
        verdict.append(f"forward rank2 {f2:.1f} ms vs others {fo:.1f} ms (+{f2 - fo:.1f}); "
                       f"rank2 excess in data+optimizer {rest:.1f} ms; gloo:all_reduce rank2 "
                       f"{g2:.1f} vs others {go:.1f} ms")
    elif name == "throttled_rank":
        S = sums[""]
        rat = {k: S[1][k] / others(S, 1, k) for k in ("data", "forward", "optimizer")}
        cr = S[1]["compute_ms"] / others(S, 1, "compute_ms")
        good = all(v > 1.3 for v in rat.values()) and cr > 1.3 and S[1]["gloo_ms"] < others(S, 1, "gloo_ms")
        verdict.append("rank1/others " + ", ".join(f"{k} x{v:.2f}" for k, v in rat.items()) +
                       f", compute x{cr:.2f}, gloo {S[1]['gloo_ms']:.1f} vs {others(S, 1, 'gloo_ms'):.1f} ms")
    elif name == "seqlen":
        b, n = sums["base"], sums["new"]
        mean = lambda S, k: sum(s[k] for s in S) / len(S)
        dstep = mean(n, "compute_ms") - mean(b, "compute_ms")
        datt = mean(n, "attention_op_ms") - mean(b, "attention_op_ms")
        drange = mean(n, "forward/attention") - mean(b, "forward/attention")
        dmlp = mean(n, "forward/mlp") - mean(b, "forward/mlp")
        good = datt / dstep > 0.5 and drange > dmlp
        verdict.append(f"compute/step +{dstep:.1f} ms; attention-named ops (fwd+bwd) +{datt:.1f} ms "
                       f"({100 * datt / dstep:.0f}%); forward/attention +{drange:.1f} ms vs "
                       f"forward/mlp +{dmlp:.1f} ms")
    elif name == "bucket":
        b, n = sums["base"], sums["new"]
        cb, cn = b[0]["allreduce_per_step"], n[0]["allreduce_per_step"]
        good = cn >= 3 * cb and all(s["allreduce_per_step"] == cb for s in b) \
            and all(s["allreduce_per_step"] == cn for s in n)
        verdict.append(f"gloo:all_reduce per step {cb:g} -> {cn:g}; MB/step "
                       f"{b[0]['MB_per_step']:.1f} -> {n[0]['MB_per_step']:.1f}")
    else:
        S = sums[""]
        names = set()
        for r in range(WORLD):
            t, _ = load(os.path.join(out, name), r)
            names |= {e["name"] for e in t["traceEvents"] if e.get("cat") == "user_annotation"}
        own = names & set(RANGES + ("forward/attention", "forward/mlp"))
        fw = [s["DistributedDataParallel.forward"] for s in S]
        op = [s["Optimizer.step#AdamW.step"] for s in S]
        step = sum(s["step_ms"] for s in S) / len(S)
        # healthy: no rank's range stands out by more than a tenth of a step
        flat = lambda v: max(v) - min(v) < 0.1 * step
        good = not own and flat(fw) and flat(op) and max(fw) / min(fw) < 1.5
        verdict.append(f"own ranges: {sorted(own) or 'none'}; torch's: "
                       f"{sorted(n for n in names if not n.startswith('ProfilerStep#'))}; per rank "
                       f"DDP.forward ms {', '.join(f'{x:.1f}' for x in fw)}; "
                       f"AdamW.step ms {', '.join(f'{x:.1f}' for x in op)}; step {step:.1f} ms")
    ok = ok and good
    for r in rows:
        print(r)
    print(f"  CHECK {name}: {'PASS' if ok else 'FAIL'} — {verdict[0]}")
    return ok, verdict[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("scenarios", nargs="*")
    ap.add_argument("--check-only", action="store_true")
    ap.add_argument("--tries", type=int, default=3,
                    help="rerun a scenario whose check fails (a shared 2-core VM is noisy)")
    a = ap.parse_intermixed_args()
    names = a.scenarios or list(SCENARIOS)
    for n in names:
        if n not in SCENARIOS:
            sys.exit(f"unknown scenario {n}; known: {', '.join(SCENARIOS)}")
    os.makedirs(a.out, exist_ok=True)
    results = {}
    for n in names:
        for attempt in range(1, (1 if a.check_only else a.tries) + 1):
            if not a.check_only:
                run_scenario(a.out, n)
            results[n] = check(a.out, n)
            if results[n][0]:
                break
            print(f"  ({n}: check failed on try {attempt} of {a.tries})")
    print("\nsummary:")
    for n, (ok, v) in results.items():
        print(f"  {n:16} {'PASS' if ok else 'FAIL'}  {v}")
    sys.exit(0 if all(ok for ok, _ in results.values()) else 1)


if __name__ == "__main__":
    main()
