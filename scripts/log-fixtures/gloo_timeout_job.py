#!/usr/bin/env python3
"""Make real PyTorch job logs of hangs and crashes on CPU (Gloo backend), for hangdoctor's log reader.

Launches a small data-parallel-like loop on 4 CPU ranks under torchrun (`python -m torch.distributed.run
--standalone --tee 3`), injects one fault on one rank, and writes the launcher's combined stdout+stderr
(torchrun's own lines, the agent's failure table, and every worker's lines with torchrun's
`[default<local_rank>]:` prefix) to tests/fixtures/logs/torch/gloo-<fault>.log.

Faults (all deterministic: which rank, which step; only line order and timestamps vary run to run):
  skip         rank 1 skips the all_reduce of step 3 and goes on. Gloo pairs collectives by their count on the
               process group, so rank 1's all_reduce of step 4 silently pairs with the others' step 3, and so on:
               nothing fails until rank 1, one collective short, enters the final barrier while ranks 0, 2, 3
               are in the all_reduce of step 5. All four then time out (rank 1 in barrier, the others in
               all_reduce).
  skip-detail  the same with TORCH_DISTRIBUTED_DEBUG=DETAIL (and c10's default log level): the ProcessGroupWrapper
               compares each collective's fingerprint across ranks, and raises "Detected mismatch between
               collectives on ranks" at that same point (rank 1 BARRIER vs the others ALLREDUCE, both
               SequenceNumber=4).
  sleep        rank 2 sleeps 3x the timeout before the all_reduce of step 3 (a straggler): ranks 0, 1, 3 time out,
               torchrun then SIGTERMs rank 2 while it still sleeps.
  crash        rank 3 SIGKILLs itself at step 3 (as the OOM killer would): the others see its connections close.
               Uses --log-line-prefix-template '${hostname}:${rank}: ' instead of the default prefix.
  exit         rank 1 returns after step 2 with exit code 0 (a rank that silently finished early): the others
               fail in step 3 and the agent's failure table does not list rank 1 at all.

Usage:  <venv>/bin/python scripts/log-fixtures/gloo_timeout_job.py [--fault F|all] [--out DIR] [--nproc 4]
It needs torch (any 2.x with torchrun); it was run with torch 2.15.0 from PyPI on a 2-core machine,
about 15-25 s per fault.
"""
import argparse
import datetime
import os
import signal
import subprocess
import sys
import tempfile
import time

FAULTS = ("skip", "skip-detail", "sleep", "crash", "exit")
TIMEOUT_S = 5
STEPS = 5
FAULT_STEP = 3
CULPRIT = {"skip": 1, "skip-detail": 1, "sleep": 2, "crash": 3, "exit": 1}


def worker(fault: str) -> None:
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=TIMEOUT_S))
    rank, world = dist.get_rank(), dist.get_world_size()
    culprit = CULPRIT[fault]
    grad = torch.ones(1024)
    for step in range(1, STEPS + 1):
        print(f"train: rank {rank}/{world} step {step} start", flush=True)
        if rank == culprit and step == FAULT_STEP:
            if fault in ("skip", "skip-detail"):
                print(f"train: rank {rank} step {step} skips its all_reduce (injected)", flush=True)
                continue
            if fault == "sleep":
                print(f"train: rank {rank} step {step} sleeps {3 * TIMEOUT_S}s before all_reduce (injected)", flush=True)
                time.sleep(3 * TIMEOUT_S)
            if fault == "crash":
                print(f"train: rank {rank} step {step} kills itself with SIGKILL (injected)", flush=True)
                os.kill(os.getpid(), signal.SIGKILL)
            if fault == "exit":
                print(f"train: rank {rank} step {step} returns early with exit code 0 (injected)", flush=True)
                return
        dist.all_reduce(grad)
        print(f"train: rank {rank} step {step} all_reduce done", flush=True)
    dist.barrier()
    print(f"train: rank {rank} finished", flush=True)
    dist.destroy_process_group()


def launch(fault: str, out_dir: str, nproc: int) -> str:
    path = os.path.join(out_dir, f"gloo-{fault}.log")
    env = dict(os.environ)
    # c10's glog-like lines ([I1128 03:12:02.038179288 socket.cpp:955] ...); not with DETAIL, whose TCPStore
    # trace lines would fill the log
    env["TORCH_CPP_LOG_LEVEL"] = "WARNING" if fault == "skip-detail" else "INFO"
    env["OMP_NUM_THREADS"] = "1"
    env.pop("TORCH_DISTRIBUTED_DEBUG", None)
    if fault == "skip-detail":
        env["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"
    with tempfile.TemporaryDirectory(prefix="gloo_fixture_") as log_dir:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
               "--tee=3", f"--log-dir={log_dir}"]
        if fault == "crash":
            cmd.append("--log-line-prefix-template=${hostname}:${rank}: ")
        cmd += [os.path.abspath(__file__), "--worker", "--fault", fault]
        t0 = time.time()
        with open(path, "wb") as f:
            rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, timeout=180).returncode
    # No path of the machine that made a fixture goes into the repository: the checkout and the venv
    # in tracebacks become fixed stand-ins.
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(path, "rb") as f:
        text = f.read()
    text = text.replace(repo.encode() + b"/", b"/home/user/rankscope/").replace(sys.prefix.encode() + b"/", b"/home/user/venv/")
    with open(path, "wb") as f:
        f.write(text)
    print(f"{fault}: torchrun exit {rc} in {time.time() - t0:.1f}s -> {path}", file=sys.stderr)
    return path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fault", default="all", choices=FAULTS + ("all",))
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                  "..", "..", "tests", "fixtures", "logs", "torch"))
    ap.add_argument("--nproc", type=int, default=4)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        worker(a.fault)
        return
    os.makedirs(a.out, exist_ok=True)
    for fault in FAULTS if a.fault == "all" else (a.fault,):
        launch(fault, a.out, a.nproc)


if __name__ == "__main__":
    main()
