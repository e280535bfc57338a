#!/usr/bin/env python3
"""tests/fixtures/torch_fr/gloo_late_retirement: the real ddp_healthy dumps (torch-jobs corpus) with
rank 1's last entry (the final gloo:barrier, #11 on default_pg) as Gloo leaves it when a dump is taken
after the caller's wait() returned but before the worker thread retired the entry: retired False,
and pg_status's last_completed_collective one behind. Every other rank retired it.

  python scripts/torch-jobs/make_late_retirement.py   (any python 3; the dumps are plain pickles)
"""
import os
import pickle
import shutil

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.join(here, "..", "..", "tests", "fixtures")
src = os.path.join(root, "torch-jobs", "ddp_healthy", "dumps")
out = os.path.join(root, "torch_fr", "gloo_late_retirement")
os.makedirs(out, exist_ok=True)
for name in sorted(os.listdir(src)):
    shutil.copy(os.path.join(src, name), os.path.join(out, name))
path = os.path.join(out, "comm_lib_trace_rank_1")
with open(path, "rb") as f:
    dump = pickle.load(f)
last = dump["entries"][-1]
assert last["profiling_name"] == "gloo:barrier" and last["retired"], last
last["retired"] = False
dump["pg_status"]["0"]["last_completed_collective"] -= 1
with open(path, "wb") as f:
    pickle.dump(dump, f, protocol=2)
