"""probe_python_wrapper_test.py — probe/c_api/rankscope_probe.py (ctypes, standard library only)
drives librankscope-probe.so as a PyTorch trainer would; `rankscope skew --json` reads the run back.

Usage: RANKSCOPE_PROBE_LIB=... python3 probe_python_wrapper_test.py RANKSCOPE_BINARY RUN_DIR
Exit 0 when every check holds; otherwise prints what failed and exits 1.
"""
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "probe", "c_api"))
import rankscope_probe  # noqa: E402

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


def main():
    rankscope, run_dir = sys.argv[1], sys.argv[2]
    shutil.rmtree(run_dir, ignore_errors=True)
    try:
        rankscope_probe.Probe(run_dir, rank=2, world_size=2)
        check(False, "a rank outside its world opened")
    except rankscope_probe.ProbeError as e:
        check("rank 2 is not inside a world of 2" in str(e), "the error says why: %s" % e)

    with rankscope_probe.Probe(run_dir, rank=0, world_size=1) as probe:
        check(probe.rank == 0 and probe.world_size == 1, "rank and world size")
        probe.write_run_json({"program": "probe_python_wrapper_test", "training": {"seq_len": 32}})
        world = probe.register_comm("world", 1, 0)
        try:
            with probe.collective(world, "allreduce_avg"):
                pass
            check(False, "an unknown op was accepted")
        except rankscope_probe.ProbeError as e:
            check("unknown collective op" in str(e), "unknown op: %s" % e)
        for step in range(4):
            with probe.step(step):
                with probe.range("forward"):
                    with probe.range("block0"):
                        with probe.range("attn"):
                            time.sleep(0.002)
                with probe.range("grad_sync"):
                    with probe.collective(world, "allreduce_sum", "fp32", count=10, nbytes=40):
                        time.sleep(0.001)
                probe.counter("loss", 4.0 - step)

    out = subprocess.run([rankscope, "skew", run_dir, "--json", "-"], capture_output=True, text=True)
    check(out.returncode in (0, 1), "rankscope skew ran: %d %s" % (out.returncode, out.stderr))
    report = json.loads(out.stdout) if out.stdout.strip() else {}
    check(report.get("steps", {}).get("count") == 4, "four steps: %s" % report.get("steps"))
    ranks = report.get("ranks", [])
    check(len(ranks) == 1 and ranks[0].get("present"), "one rank present")
    check(set(ranks[0].get("top_level_ms", {})) >= {"forward", "grad_sync"} if ranks else False,
          "top-level ranges forward and grad_sync: %s" % (ranks[0].get("top_level_ms") if ranks else None))
    with open(os.path.join(run_dir, "rank00000.events"), "rb") as f:
        names = f.read()
    check(b"forward/block0/attn" in names,
          "nested ranges are recorded as paths: forward/block0/attn")
    check(any(c.get("comm") == "world" and c.get("range") == "grad_sync" for c in report.get("collectives", [])),
          "the all-reduce on world in grad_sync: %s" % report.get("collectives"))
    with open(os.path.join(run_dir, "run.json")) as f:
        meta = json.load(f)
    check(meta.get("program") == "probe_python_wrapper_test" and meta.get("world_size") == 1, "run.json")
    for f in failures:
        print("FAILED:", f)
    print("probe_python_wrapper: %d checks failed" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
