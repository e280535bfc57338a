#!/usr/bin/env python3
"""Writes the process groups megatron.core.parallel_state.initialize_model_parallel creates for a layout
of gloo_megatron_job.py: {group name: {"desc": ..., "ranks": [global ranks]}}.

Gloo's Flight Recorder dumps lose this (pg_config has one entry, keyed '', see the README), so the
fixtures carry it beside them as <layout>_groups.json. Computed without a job: each of the 16 ranks
in turn builds Megatron's groups on torch's in-process "fake" backend, which names groups with the
same counter (distributed_c10d._process_group_name) as any other backend; gloo_megatron_job.py's
dumps name the same groups (checked against every dump in tests/fixtures/torch_fr/gloo16 by
--check).

  python scripts/fr-fixtures/megatron_groups.py --layout tp4pp2 > tests/fixtures/torch_fr/gloo16/tp4pp2_groups.json
  python scripts/fr-fixtures/megatron_groups.py --layout tp4pp2 --check tests/fixtures/torch_fr/gloo16/tp4pp2_*
"""

import argparse
import glob
import json
import os
import pickle
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gloo_megatron_job import LAYOUTS, WORLD  # noqa: E402


def groups_of(layout):
    warnings.filterwarnings("ignore")
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore
    from megatron.core import parallel_state as ps

    tp, pp, dp, _ = LAYOUTS[layout]
    # Megatron also creates *_GLOO groups (backend="gloo"); gloo cannot run on the fake store, so those
    # are made on the fake backend too: only their names and ranks matter here, and new_group numbers
    # a group whatever its backend.
    real_create_group = ps.create_group

    def create_group(ranks=None, timeout=None, backend=None, **kw):
        return real_create_group(ranks=ranks, timeout=timeout, backend=None, **kw)

    ps.create_group = create_group
    groups = {}
    for rank in range(WORLD):
        dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=WORLD)
        ps.initialize_model_parallel(
            tensor_model_parallel_size=tp,
            pipeline_model_parallel_size=pp,
            expert_model_parallel_size=tp * dp,
            expert_tensor_parallel_size=1,
            distributed_timeout_minutes=2,
        )
        world = dist.distributed_c10d._world
        for pg, name in world.pg_names.items():
            ranks = sorted(dist.get_process_group_ranks(pg))
            desc = pg.group_desc
            old = groups.setdefault(name, {"desc": desc, "ranks": ranks})
            assert old == {"desc": desc, "ranks": ranks}, (name, old, desc, ranks)
        ps.destroy_model_parallel()
        dist.destroy_process_group()
    return dict(sorted(groups.items(), key=lambda kv: int(kv[0])))


def check(groups, folders):
    bad = 0
    for folder in folders:
        for path in sorted(glob.glob(os.path.join(folder, "comm_lib_trace_rank_*"))):
            rank = int(path.rsplit("_", 1)[1])
            raw = open(path, "rb").read()
            d = json.loads(raw) if raw[:1] == b"{" else pickle.loads(raw)
            for e in d["entries"]:
                name, desc = e["process_group"]
                g = groups.get(name)
                if g is None or g["desc"] != desc or rank not in g["ranks"]:
                    print(f"{path}: {name} {desc} not in the layout's groups", file=sys.stderr)
                    bad += 1
    print(f"checked {len(folders)} folders: {bad} entries disagree", file=sys.stderr)
    return bad == 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layout", choices=sorted(LAYOUTS), required=True)
    ap.add_argument("--check", nargs="*", help="fixture folders whose entries must name these groups")
    args = ap.parse_args()
    groups = groups_of(args.layout)
    if args.check:
        sys.exit(0 if check(groups, args.check) else 1)
    sys.stdout.write(
        "{\n" + ",\n".join(f" {json.dumps(k)}: {json.dumps(v)}" for k, v in groups.items()) + "\n}\n"
    )


if __name__ == "__main__":
    main()
