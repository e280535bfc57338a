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

Scenarios that also keep every rank's stacks (py-spy dump, twice 1 s apart, into $STACKS_DIR/rank<R>.txt;
py-spy must be on PATH):
  ddp_healthy         4 ranks, DDP, 4 steps, stacks at the end (every rank in the same line); healthy.
  ddp_skip_collective 4 ranks, DDP: a data-dependent branch makes rank 2 skip the loss all_reduce at
                      the last step; it saves a checkpoint (a sleep) while the others wait in the
                      all_reduce. (A final barrier instead is matched by Gloo with the others' 1-element
                      all_reduce: no hang.) Culprit 2.
  ddp_skip_abort      the same branch at step 1: rank 2 runs ahead into the next step's gradient
                      all_reduce (676 elements) where the others reduce the loss (1): Gloo's size
                      check aborts rank 1 (the receiver), not rank 2. Culprit 2.
  extra_collective    4 ranks: rank 3 makes one all_reduce more than the others, then all meet at a
                      barrier (rank 3 waits in its all_reduce, the others in the barrier). Culprit 3.
  dataloader_stall    4 ranks, DDP over a DataLoader with a worker process: rank 1's worker blocks on
                      one sample; rank 1's main thread waits for the batch, the others in the gradient
                      all_reduce. Culprit 1.
  wrong_size          4 ranks: rank 1 all_reduces 65 elements where the others reduce 64. Culprit 1.
  pipeline_sleep      4 ranks, torch.distributed.pipelining, Schedule1F1B over 4 stages: the stage of
                      rank 2 sleeps in its forward (stage_forward); Gloo's recorder keeps no send/recv.
                      Culprit 2.
  debug_server_stall  4 ranks with torch.distributed.debug.start_debug_server(dump_dir=$DEBUG_DUMP_DIR,
                      dump_interval=2): rank 2 sleeps in stage_forward while the others wait in
                      all_reduce; the server's periodic files are kept. Culprit 2.
  pipeline_healthy    4 ranks, Schedule1F1B over 4 stages, 3 steps, stacks at the end; healthy.
  gpipe_sleep         4 ranks, ScheduleGPipe over 4 stages: rank 1's stage sleeps in stage_forward.
                      Culprit 1.
  sigkill_rank        4 ranks, DDP: rank 3 is SIGKILLed at step 2 (as the OOM killer does); it leaves
                      no dump and no stack. Culprit 3.
  gil_held            4 ranks: rank 2 runs a regular expression that holds the GIL (its watcher can
                      neither dump nor take its stacks). Culprit 2.
  ddp_healthy_8       ddp_healthy on 8 ranks; healthy.
  fsdp2_sleep         4 ranks, FSDP2 fully_shard: rank 1 sleeps in stage_forward (its 4th forward).
                      Culprit 1.
  dataloader_healthy  4 ranks, DDP over a DataLoader with a worker, stacks at the end; healthy.
  debug_server_healthy 4 ranks, DDP, 40 steps of 0.2 s under the debug server (dump_interval=2);
                      healthy: its stacks_ files catch the ranks mid-step.
  fsdp2_healthy       4 ranks, FSDP2 fully_shard, 4 steps, stacks at the end; healthy.
  ddp_skip_collective_8, dataloader_stall_8, fsdp2_sleep_8, extra_collective_8: the same on 8 ranks.
  pipeline_sleep_8    8 ranks, Schedule1F1B over 8 stages: rank 5's stage sleeps. Culprit 5.
  interleaved_healthy ScheduleInterleaved1F1B, 4 ranks x 2 stages each, 3 steps; healthy.
  interleaved_sleep   the same; rank 2's first stage sleeps in stage_forward. Culprit 2.
  subgroup_healthy    8 ranks, subgroups {1,3,5,7} and {0,2,4,6} each all_reduce, then the world; healthy.
  subgroup_extra      8 ranks: rank 4 makes one all_reduce more on {0,2,4,6}, then every rank meets at
                      a barrier. Culprit 4.
  fsdp2_tp_sleep      FSDP2 + TP (dp 2 x tp 2): rank 3 sleeps in its forward. Culprit 3.
  fsdp2_tp_healthy_8  FSDP2 + TP (dp 4 x tp 2) on 8 ranks; healthy.
  tp_raise            TP over 4 ranks: rank 1 raises in its forward and exits without a dump. Culprit 1.
  pipeline_raise      Schedule1F1B over 4 stages: rank 1's stage raises in its forward. Culprit 1.
  fsdp2_dataloader_stall FSDP2 over a DataLoader: rank 2's worker blocks on one sample. Culprit 2.
  ddp_healthy_16, ddp_skip_collective_16: DDP on 16 ranks (healthy; rank 2 skips).
  sigkill_rank_8, gil_held_8, raise_no_dump_8, wrong_size_8: the 4-rank faults on 8 ranks (3, 2, 3, 1).
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


def take_stacks(why):
    """py-spy dump of this rank, twice 1 s apart (two snapshots: a frame that did not move)."""
    import subprocess
    out = os.environ.get("STACKS_DIR")
    if not out:
        return
    for _ in range(2):
        r = subprocess.run(["py-spy", "dump", "--nonblocking", "--pid", str(os.getpid())],
                           capture_output=True, text=True, timeout=30)
        with open(os.path.join(out, f"rank{RANK}.txt"), "a") as f:
            f.write(r.stdout)
        time.sleep(1)
    log(f"took stacks ({why})")


def stacks_later():
    """A rank blocked in a collective (or a sleep) has its stacks taken from this thread."""
    def run():
        time.sleep(DUMP_AFTER_S)
        dump("watcher, still blocked")
        take_stacks("watcher, still blocked")
    threading.Thread(target=run, daemon=True).start()


def end_healthy():
    """Every rank takes its stacks at the same point, then dumps once Gloo retired the last barrier
    (its worker retires an entry after the caller's wait() returned: a dump at once could show it open)."""
    dist.barrier()
    take_stacks("done, healthy")
    dist.barrier()
    time.sleep(0.5)
    dump("done, healthy")


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
    # show the barrier still open on this rank (hangdoctor reads that as a late retirement; the fixtures
    # stay clear of it).
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
    # show the barrier still open on this rank (hangdoctor reads that as a late retirement; the fixtures
    # stay clear of it).
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


def ddp_model():
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(0)
    return DDP(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)))


def ddp_healthy():
    model = ddp_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(4):
        loss = model(torch.randn(8, 16)).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        log(f"step {step} loss {loss.item():.4f}")
    end_healthy()


def ddp_skip_collective(skip_step=3):
    model = ddp_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    stacks_later()
    for step in range(4):
        torch.manual_seed(step * 10 + RANK)
        x = torch.randn(8, 16) * (10.0 if (RANK == 2 and step == skip_step) else 1.0)
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        if loss.item() < 1.0:  # a data-dependent branch: an outlier batch skips the metric's all_reduce
            metric = loss.detach().clone()
            dist.all_reduce(metric)
        log(f"step {step} loss {loss.item():.4f}")
    # A checkpoint's save (no collective): the others wait in the loss all_reduce rank 2 skipped.
    time.sleep(DUMP_AFTER_S + 4)
    dump("done")


def ddp_skip_abort():
    ddp_skip_collective(skip_step=1)


def extra_collective():
    x = torch.ones(32)
    stacks_later()
    for step in range(3):
        dist.all_reduce(x)
        if RANK == 3 and step == 1:
            dist.all_reduce(x)  # one more than the others
    dist.barrier()
    dump("done")


class SlowOnRank1(torch.utils.data.Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        if RANK == 1 and i == 24:
            time.sleep(3600)  # the worker blocks on this sample
        return torch.randn(16)


def train_over_loader(model, dataset):
    """Steps over a DataLoader with one worker process until it ends (or blocks)."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = torch.utils.data.DataLoader(dataset, batch_size=8, num_workers=1)
    stacks_later()
    for step, x in enumerate(loader):
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        log(f"step {step}")
    dump("done")


def dataloader_stall():
    train_over_loader(ddp_model(), SlowOnRank1())


def wrong_size():
    stacks_later()
    for step in range(3):
        x = torch.ones(65 if (RANK == 1 and step == 2) else 64)
        dist.all_reduce(x)
        log(f"step {step}")
    dump("done")


def stage_forward(module, x):
    if RANK == stage_forward.sleeper and stage_forward.calls == 3:
        log(f"rank {RANK} sleeps in its stage's forward")
        time.sleep(3600)
    stage_forward.calls += 1
    return module(x)


stage_forward.calls = 0
stage_forward.sleeper = 2


def pipeline_step(sched):
    """One schedule step: the first stage feeds the input, the last the target."""
    x = torch.randn(8, 16)
    if RANK == 0:
        sched.step(x)
    elif RANK == WORLD - 1:
        sched.step(target=torch.randn(8, 16))
    else:
        sched.step()


class Stage(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 16)

    def forward(self, x):
        return stage_forward(self.lin, x)


def pipeline_sleep():
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B
    torch.manual_seed(RANK)
    stage = PipelineStage(Stage(), RANK, WORLD, torch.device("cpu"))
    sched = Schedule1F1B(stage, n_microbatches=4, loss_fn=lambda y, t: (y - t).pow(2).mean())
    stacks_later()
    for step in range(3):
        pipeline_step(sched)
        log(f"step {step}")
    dump("done")


def debug_server_stall():
    from torch.distributed.debug import start_debug_server
    start_debug_server(port=int(os.environ.get("DEBUG_PORT", "25999")), dump_dir=os.environ["DEBUG_DUMP_DIR"],
                       dump_interval=2.0, start_method="spawn")
    x = torch.ones(32)
    for step in range(3):
        if RANK == 2 and step == 2:
            stage_forward.calls = 3
            stage_forward(nn.Identity(), x)
        dist.all_reduce(x)
        log(f"step {step}")
    dump("done")


def pipeline_run(schedule_name, sleeper=-1, stages_per_rank=1):
    """A pipeline schedule over every rank; with stages_per_rank 2 (interleaved), rank r holds stages
    r and r + WORLD."""
    from torch.distributed import pipelining
    torch.manual_seed(RANK)
    stages = [pipelining.PipelineStage(Stage(), RANK + k * WORLD, stages_per_rank * WORLD, torch.device("cpu"))
              for k in range(stages_per_rank)]
    sched = getattr(pipelining, schedule_name)(stages[0] if stages_per_rank == 1 else stages,
                                               n_microbatches=max(4, WORLD),  # at least one per stage
                                               loss_fn=lambda y, t: (y - t).pow(2).mean())
    stage_forward.sleeper = sleeper
    if sleeper >= 0:
        stacks_later()
    for step in range(3):
        pipeline_step(sched)
        log(f"step {step}")
    if sleeper < 0:
        dist.barrier()
        take_stacks("done, healthy")
        dist.barrier()
        time.sleep(0.5)
    dump("done")


def pipeline_healthy():
    pipeline_run("Schedule1F1B")


def gpipe_sleep():
    pipeline_run("ScheduleGPipe", sleeper=1)


def sigkill_rank():
    import signal
    model = ddp_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    if RANK != 3:
        stacks_later()
    for step in range(4):
        if RANK == 3 and step == 2:
            log("rank 3 is killed (SIGKILL, as the OOM killer does)")
            os.kill(os.getpid(), signal.SIGKILL)
        loss = model(torch.randn(8, 16)).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        log(f"step {step}")
    dump("done")


def gil_held():
    import re
    x = torch.ones(32)
    stacks_later()
    for step in range(3):
        if RANK == 2 and step == 1:
            log("rank 2 runs a regular expression that holds the GIL")
            re.match(r"(a+)+b", "a" * 29)  # catastrophic backtracking in C: the GIL is never released
        dist.all_reduce(x)
        log(f"step {step}")
    dump("done")


def ddp_healthy_8():
    ddp_healthy()


def fsdp2_sleep():
    from torch.distributed.fsdp import fully_shard
    torch.manual_seed(0)
    model = nn.Sequential(Stage(), nn.ReLU(), nn.Linear(16, 16))
    fully_shard(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    stage_forward.sleeper = 1
    stacks_later()
    for step in range(6):
        loss = model(torch.randn(8, 16)).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        log(f"step {step}")
    dump("done")


def dataloader_healthy():
    model = ddp_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(32, 16)), batch_size=8,
                                         num_workers=1)
    for step, (x,) in enumerate(loader):
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        log(f"step {step}")
    end_healthy()


def debug_server_healthy():
    from torch.distributed.debug import start_debug_server
    start_debug_server(port=int(os.environ.get("DEBUG_PORT", "25999")), dump_dir=os.environ["DEBUG_DUMP_DIR"],
                       dump_interval=2.0, start_method="spawn")
    model = ddp_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(40):
        loss = model(torch.randn(8, 16)).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        time.sleep(0.2)  # a step's compute
        if step % 10 == 0:
            log(f"step {step}")
    dist.barrier()
    time.sleep(0.5)
    dump("done, healthy")


def fsdp2_healthy():
    stage_forward.sleeper = -1
    from torch.distributed.fsdp import fully_shard
    torch.manual_seed(0)
    model = nn.Sequential(Stage(), nn.ReLU(), nn.Linear(16, 16))
    fully_shard(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(4):
        loss = model(torch.randn(8, 16)).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        log(f"step {step}")
    end_healthy()


def ddp_skip_collective_8():
    ddp_skip_collective()


def dataloader_stall_8():
    dataloader_stall()


def fsdp2_sleep_8():
    fsdp2_sleep()


def extra_collective_8():
    extra_collective()


def pipeline_sleep_8():
    pipeline_run("Schedule1F1B", sleeper=5)


# ---- the corpus's second round: interleaved pipelines, subgroups, TP faults, 16 ranks ----

def interleaved_healthy():
    pipeline_run("ScheduleInterleaved1F1B", stages_per_rank=2)


def interleaved_sleep():
    pipeline_run("ScheduleInterleaved1F1B", sleeper=2, stages_per_rank=2)


def subgroup_healthy():
    odd = dist.new_group([1, 3, 5, 7], backend="gloo")
    even = dist.new_group([0, 2, 4, 6], backend="gloo")
    mine = odd if RANK % 2 else even
    x = torch.ones(64)
    for step in range(4):
        dist.all_reduce(x, group=mine)
        dist.all_reduce(x)
        log(f"step {step}")
    end_healthy()


def subgroup_extra():
    """Rank 4 makes one all_reduce more on its subgroup {0,2,4,6}; then every rank meets at a barrier."""
    even = dist.new_group([0, 2, 4, 6], backend="gloo")
    x = torch.ones(64)
    stacks_later()
    for step in range(3):
        if RANK % 2 == 0:
            dist.all_reduce(x, group=even)
            if RANK == 4 and step == 1:
                dist.all_reduce(x, group=even)  # one more than its group
        dist.all_reduce(x)
        log(f"step {step}")
    dist.barrier()
    dump("done")


def tp_model(mesh_tp, first=None):
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    torch.manual_seed(0)
    model = nn.Sequential(first or Stage(), nn.ReLU(), nn.Linear(32, 16))
    if first is None:
        model[0].lin = nn.Linear(16, 32)
    parallelize_module(model, mesh_tp, {"0.lin": ColwiseParallel(), "2": RowwiseParallel()})
    return model


def fsdp2_tp_run(sleeper=-1, steps=3):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    mesh = init_device_mesh("cpu", (WORLD // 2, 2), mesh_dim_names=("dp", "tp"))
    model = tp_model(mesh["tp"])
    fully_shard(model, mesh=mesh["dp"])
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    stage_forward.sleeper = sleeper
    if sleeper >= 0:
        stacks_later()
    for step in range(steps):
        loss = model(torch.randn(4, 16)).sum()
        loss.backward()
        opt.step()
        opt.zero_grad()
        log(f"step {step} loss {loss.item():.4f}")
    dist.barrier()
    if sleeper < 0:
        take_stacks("done, healthy")
        dist.barrier()
    time.sleep(0.5)
    dump("done")


def fsdp2_tp_sleep():
    fsdp2_tp_run(sleeper=3, steps=6)


def fsdp2_tp_healthy_8():
    fsdp2_tp_run()


def tp_raise():
    """Tensor parallel over every rank: rank 1 raises in its forward and exits a few seconds later
    without a dump; the others wait in the row-parallel layer's all_reduce."""
    from torch.distributed.device_mesh import init_device_mesh

    class RaisingStage(Stage):
        def forward(self, x):
            if RANK == 1 and tp_raise.calls == 2:
                log("rank 1 raises in its forward")
                time.sleep(0.5)
                raise RuntimeError("rank 1: injected failure in forward")
            tp_raise.calls += 1
            return self.lin(x)

    mesh = init_device_mesh("cpu", (WORLD,), mesh_dim_names=("tp",))
    first = RaisingStage()
    first.lin = nn.Linear(16, 32)
    model = tp_model(mesh, first)
    if RANK != 1:
        stacks_later()
    for step in range(4):
        try:
            y = model(torch.randn(4, 16))
        except RuntimeError:
            time.sleep(DUMP_AFTER_S + 3)  # still alive a while, then gone; it never dumps
            raise
        y.sum().backward()
        log(f"step {step}")
    dump("done")


tp_raise.calls = 0


def pipeline_raise():
    """Schedule1F1B over 4 stages: rank 1's stage raises in its forward; it exits without a dump."""
    from torch.distributed import pipelining
    torch.manual_seed(RANK)

    class RaisingStage(Stage):
        def forward(self, x):
            if RANK == 1 and pipeline_raise.calls == 5:
                log("rank 1 raises in its stage's forward")
                raise RuntimeError("rank 1: injected failure in the stage's forward")
            pipeline_raise.calls += 1
            return self.lin(x)

    stage = pipelining.PipelineStage(RaisingStage(), RANK, WORLD, torch.device("cpu"))
    sched = pipelining.Schedule1F1B(stage, n_microbatches=4, loss_fn=lambda y, t: (y - t).pow(2).mean())
    if RANK != 1:
        stacks_later()
    for step in range(3):
        try:
            pipeline_step(sched)
        except RuntimeError:
            time.sleep(DUMP_AFTER_S + 3)
            raise
        log(f"step {step}")
    dump("done")


pipeline_raise.calls = 0


class SlowOnRank2(torch.utils.data.Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        if RANK == 2 and i == 16:
            time.sleep(3600)
        return torch.randn(16)


def fsdp2_dataloader_stall():
    """FSDP2 over a DataLoader with a worker: rank 2's worker blocks on one sample."""
    from torch.distributed.fsdp import fully_shard
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 16))
    fully_shard(model)
    train_over_loader(model, SlowOnRank2())


def ddp_healthy_16():
    ddp_healthy()


def ddp_skip_collective_16():
    ddp_skip_collective()


def sigkill_rank_8():
    sigkill_rank()


def gil_held_8():
    gil_held()


def raise_no_dump_8():
    raise_no_dump()


def wrong_size_8():
    wrong_size()


def main():
    scenario = sys.argv[1]
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=20))
    log(f"rank {RANK} of {WORLD}: {scenario}")
    globals()[scenario]()
    log("finished")


if __name__ == "__main__":
    main()
