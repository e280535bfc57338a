#!/usr/bin/env python3
"""Prints what a folder of Flight Recorder dumps shows, rank by rank (plain pickle/json reading).

  python scripts/fr-fixtures/describe_dumps.py tests/fixtures/torch_fr/gloo16/tp4pp2_gil_held ...

Per rank: entry count, ring span (record_id range), the last entry (group desc, collective_seq_id,
op_id, op, retired or open), every open entry (retired False), and pg_status of the groups with an
open entry. Ranks that left no dump are listed as such.
"""

import json
import os
import pickle
import re
import sys


def load(path):
    raw = open(path, "rb").read()
    return json.loads(raw) if raw[:1] == b"{" else pickle.loads(raw)


def short(e):
    pg, desc = e["process_group"]
    return f"{desc}({pg})#{e['collective_seq_id']} op{e['op_id']} {e['profiling_name']}"


def describe(folder, world=16):
    files = {}
    for n in os.listdir(folder):
        m = re.match(r"(.*?)(\d+)$", n)
        if m and not n.endswith(".txt"):
            files[int(m.group(2))] = os.path.join(folder, n)
    print(f"== {os.path.basename(os.path.normpath(folder))}")
    fr = os.path.join(folder, "faulted_ranks.txt")
    if os.path.exists(fr):
        print("faulted ranks:", open(fr).read().strip() or "none")
    versions = set()
    for r in range(world):
        if r not in files:
            print(f"rank {r:2d}: no dump")
            continue
        d = load(files[r])
        versions.add(d["version"])
        es = d["entries"]
        if not es:
            print(f"rank {r:2d}: 0 entries")
            continue
        opened = [e for e in es if not e["retired"]]
        last = es[-1]
        line = (
            f"rank {r:2d}: {len(es)} entries (record_id {es[0]['record_id']}-{es[-1]['record_id']}), "
            f"last {short(last)} {'retired' if last['retired'] else 'OPEN'}"
        )
        if opened:
            st = d["pg_status"]
            line += "; open: " + ", ".join(
                f"{short(e)} [pg_status {e['pg_id']}: enq {st[str(e['pg_id'])]['last_enqueued_collective']}"
                f" done {st[str(e['pg_id'])]['last_completed_collective']}]"
                for e in opened
            )
        print(line)
    print("versions:", sorted(versions))


if __name__ == "__main__":
    for f in sys.argv[1:]:
        describe(f)
        print()
