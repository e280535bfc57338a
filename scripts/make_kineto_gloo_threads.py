#!/usr/bin/env python3
"""make_kineto_gloo_threads.py — records a real two-rank Gloo job whose collectives overlap in time.

Is: the maker of tests/fixtures/kineto/gloo-threads/ (the skew analyzer's fixture for time classes
that are unions, never sums). Two CPU processes join a Gloo world and a second
Gloo process group of the same two ranks; in every profiled step each rank runs two all-reduces
at the same time, one per group, from two threads, so Kineto records two `gloo:all_reduce`
annotations on two threads that overlap. Rank 1 sleeps in `data` (DELAY_MS) so rank 0 waits at
both. The step is made of `data`, `forward` (a small matmul) and `grad_sync` (the two threads);
`torch.profiler` exports one Chrome trace per rank with `export_chrome_trace` (by a relative name,
which Kineto copies into the trace's `traceName`), then the traces are gzipped (no other change). Is not: a GPU job (no kernels) or a model of training.

Run with a PyTorch that has Gloo (here: the venv at ../venv-torch beside the checkout):
    python scripts/make_kineto_gloo_threads.py OUT_DIR
"""
import gzip
import os
import shutil
import sys
import threading
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.profiler import ProfilerActivity, profile, record_function, schedule

STEPS = 4            # profiled steps (after one wait and one warm-up step)
ELEMENTS = 1 << 18   # floats per all-reduce: 1 MiB, a few ms on loopback
DELAY_MS = 20        # rank 1's extra time in `data`


def worker(rank, world, out_dir, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    second = dist.new_group(ranks=list(range(world)), backend="gloo")
    a = torch.ones(ELEMENTS)
    b = torch.ones(ELEMENTS)
    x = torch.randn(256, 256)

    def reduce_on(group, t):
        dist.all_reduce(t, group=group)

    # A relative name: Kineto writes the export path into the trace (traceName); no machine path.
    os.chdir(out_dir)
    path = f"rank{rank}.json"
    # profile_all_threads: Gloo runs each collective on its own worker threads, which a CPU-only
    # profile otherwise leaves out (a CUDA profile records them anyway).
    prof = profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=STEPS),
                   on_trace_ready=lambda p: p.export_chrome_trace(path),
                   experimental_config=torch._C._profiler._ExperimentalConfig(profile_all_threads=True))
    with prof:
        for _ in range(STEPS + 2):
            with record_function("data"):
                time.sleep((DELAY_MS if rank == 1 else 1) / 1000.0)
            with record_function("forward"):
                x = torch.tanh(x @ x.t() / 256.0)
            with record_function("grad_sync"):
                threads = [threading.Thread(target=reduce_on, args=(None, a)),
                           threading.Thread(target=reduce_on, args=(second, b))]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
            prof.step()
    dist.barrier()
    dist.destroy_process_group()
    with open(path, "rb") as src, gzip.open(path + ".gz", "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)
    os.remove(path)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_kineto_gloo_threads.py OUT_DIR")
    out_dir = os.path.abspath(sys.argv[1])
    os.makedirs(out_dir, exist_ok=True)
    mp.spawn(worker, args=(2, out_dir, 29533), nprocs=2, join=True)


if __name__ == "__main__":
    main()
