#!/usr/bin/env python3
"""Real small PyTorch jobs on the CPU (Gloo) whose Flight Recorder dumps and log become fixtures.

Run under torchrun (make_fixtures.sh does): every rank runs SCENARIO, then writes its Flight Recorder
dump (torch._C._distributed_c10d._dump_fr_trace_file, to $TORCH_FR_DUMP_TEMP_FILE<rank>) when the
job is done, when a collective of its own failed, or, from a watcher thread, DUMP_AFTER_S seconds
after the fault began while it is still blocked (Gloo has no watchdog that dumps).

Scenarios (truth.json is written by make_fixtures.sh):
  fsdp2_tp_healthy    4 ranks, 2-D DeviceMesh (dp 2 x tp 2): a Colwise/Rowwise tensor-parallel MLP,
                      fully_shard over dp, 3 training steps; healthy.
  dtensor_scatter     4 ranks: distribute_tensor(Shard(0)) from rank 0 (a gloo:scatter whose non-root
                      entries carry no sizes) and a few redistributions; healthy.
  subgroup_hang       8 ranks, new_group([1,3,5,7]): rank 5 sleeps instead of the subgroup's
                      monitored_barrier and next all_reduce; the group's rank 0 (global rank 1) logs
                      that group rank 2 (= global rank 5) failed to pass it. Every rank dumps while
                      the others wait. Culprit 5.
  raise_no_dump       4 ranks: rank 3 raises in backward and exits (a few seconds later) without a
                      dump; the others dump while they wait in the gradient all_reduce. Culprit 3.
"""
import datetime
import os
import sys
import threading
import time

import torch
import torch.distributed as dist
import torch.nn as nn

C = torch._C._distributed_c10d
RANK = int(os.environ["RANK"])
WORLD = int(os.environ["WORLD_SIZE"])
DUMP_AFTER_S = float(os.environ.get("DUMP_AFTER_S", "6"))
_dumped = threading.Event()


def log(msg):
    print(f"{time.strftime('%H:%M:%S')} {msg}", flush=True)


def dump(why):
    if _dumped.is_set():
        return
    _dumped.set()
    C._dump_fr_trace_file(RANK, includeCollectives=True, includeStackTraces=False, onlyActive=False)
    log(f"dumped Flight Recorder ({why})")


def dump_later():
    """A rank blocked in a collective dumps from this thread (the main thread cannot)."""
    def run():
        time.sleep(DUMP_AFTER_S)
        dump("watcher, still blocked")
    threading.Thread(target=run, daemon=True).start()


def fsdp2_tp_healthy():
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 16))
    parallelize_module(model, mesh["tp"], {"0": ColwiseParallel(), "2": RowwiseParallel()})
    fully_shard(model, mesh=mesh["dp"])
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        x = torch.randn(4, 16)
        loss = model(x).sum()
        loss.backward()
        opt.step()
        opt.zero_grad()
        log(f"step {step} loss {loss.item():.4f}")
    dist.barrier()
    # Gloo's worker retires an entry after the caller's wait() returned: a dump taken at once can
    # show the barrier still open on this rank (a race hangdoctor does not yet tell from a hang).
    time.sleep(0.5)
    dump("done, healthy")


def dtensor_scatter():
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    mesh = init_device_mesh("cpu", (WORLD,), mesh_dim_names=("tp",))
    torch.manual_seed(0)
    full = torch.randn(8 * WORLD, 4)
    d = distribute_tensor(full, mesh, [Shard(0)])  # gloo:scatter from rank 0
    r = d.redistribute(mesh, [Replicate()])        # all_gather
    s = r.redistribute(mesh, [Shard(1)])            # local chunk
    log(f"local {tuple(d.to_local().shape)} replicated {tuple(r.to_local().shape)} sharded {tuple(s.to_local().shape)}")
    dist.barrier()
    # Gloo's worker retires an entry after the caller's wait() returned: a dump taken at once can
    # show the barrier still open on this rank (a race hangdoctor does not yet tell from a hang).
    time.sleep(0.5)
    dump("done, healthy")


def subgroup_hang():
    members = [1, 3, 5, 7]
    group = dist.new_group(members, backend="gloo", timeout=datetime.timedelta(seconds=20))
    # monitored_barrier on a group of its own: a failed one closes its pairs (Gloo's "Application
    # timeout caused pair closure"), which would end the hang on `group` before the dumps.
    barrier_group = dist.new_group(members, backend="gloo", timeout=datetime.timedelta(seconds=20))
    x = torch.ones(64)
    dist.all_reduce(x)  # every rank, default group
    dump_later()        # every rank dumps while the job hangs (rank 5's sleep leaves its GIL free)
    if RANK not in members:
        dist.barrier()  # waits for the members, which never come
        return
    dist.all_reduce(x, group=group)
    if RANK == 5:
        log("rank 5 sleeps instead of the subgroup's monitored_barrier and next all_reduce")
        time.sleep(DUMP_AFTER_S + 8)
        return
    # The next all_reduce is queued (Gloo's worker blocks in it, waiting for rank 5) while the
    # group's rank 0 (global rank 1) runs monitored_barrier, which names the members that did not
    # arrive by their GROUP rank. The dumps come first (DUMP_AFTER_S < the barrier's timeout):
    # a failed monitored_barrier makes the job fall apart within a second.
    work = dist.all_reduce(x, group=group, async_op=True)
    try:
        dist.monitored_barrier(group=barrier_group, timeout=datetime.timedelta(seconds=DUMP_AFTER_S + 2),
                               wait_all_ranks=True)
    except RuntimeError as e:
        log(f"monitored_barrier failed: {str(e).splitlines()[0]}")
    work.wait()


class RaiseInBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        raise RuntimeError(f"rank {RANK}: injected failure in backward")


def raise_no_dump():
    torch.manual_seed(0)
    model = nn.Linear(16, 16)
    if RANK != 3:
        dump_later()  # the others dump while they wait in the gradient all_reduce rank 3 never enters
    for step in range(3):
        x = torch.randn(4, 16)
        y = model(x)
        if RANK == 3 and step == 2:
            y = RaiseInBackward.apply(y)
        try:
            y.sum().backward()
        except RuntimeError:
            # Still alive a while (cleanup, a checkpoint), then gone; it never dumps.
            log("backward raised; exiting without a dump")
            time.sleep(DUMP_AFTER_S + 3)
            raise
        for p in model.parameters():
            dist.all_reduce(p.grad)
        log(f"step {step}")
    dump("done")


def main():
    scenario = sys.argv[1]
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=20))
    log(f"rank {RANK} of {WORLD}: {scenario}")
    globals()[scenario]()
    log("finished")


if __name__ == "__main__":
    main()
