#!/usr/bin/env python3
"""Real PyTorch Flight Recorder dumps of a 16-rank, Megatron-LM-shaped MoE job on Gloo (CPU).

Launches 16 ranks on this machine (one process each, backend gloo, FileStore rendezvous), builds
Megatron-Core's process groups with megatron.core.parallel_state.initialize_model_parallel (so the
group creation order, descs and names are Megatron's own), and runs a few training-like iterations of
a one-layer MoE transformer per pipeline stage:

  per iteration   TP broadcast x2 of the batch (get_batch), 1F1B pipeline schedule over the
                  microbatches, then DP grad all_reduce, expert-DP grad all_reduce, embedding-grad
                  all_reduce (first/last stage), grad-norm all_reduce on the model-parallel group,
                  MoE aux-loss tracker all_reduce, loss all_reduce on the last stage
  per microbatch  forward: TP all_gather_into_tensor + reduce_scatter_tensor (Megatron's
                  _all_gather_base / _reduce_scatter_base, sequence-parallel attention),
                  router aux-loss all_reduce (tensor+context group), token-count all_gather on the
                  expert tensor+model group, all_to_all_single dispatch of tokens and of probs with
                  uneven per-rank splits, all_to_all_single combine; last stage: 3 TP all_reduces of
                  the vocab-parallel cross entropy.  backward: the a2a and TP ops in reverse.
                  Stage-to-stage activations/grads go by P2P exactly like
                  megatron/core/pipeline_parallel/p2p_communication.py: `_p2p_ops` (isend/irecv,
                  with PP=2 one direction on the WORLD group) or `_batched_p2p_ops`
                  (batch_isend_irecv).

Faults (--scenario, the ranks in faulted_ranks()) are injected in the last iteration:
  gil_held            ranks 9 and 14 hold the GIL in a C call (ctypes.PyDLL libc sleep): the first
                      to reach the MoE dispatch of microbatch 1, then the other at once from a
                      background thread wherever its main thread is
  rank_killed         rank 9 SIGKILLs itself before the MoE dispatch of microbatch 1
  stage_stall         every rank of pipeline stage 1 sleeps in forward_step of microbatch 0
  a2a_count_mismatch  rank 14 sends one token row too many to one EP peer and one too few to another
                      in the dispatch all_to_all_single of microbatch 1
  lagging_rank        rank 5 sleeps --lag-s before the TP all_gather of microbatch 0
and the Flight Recorder is dumped --dump-delay-s later by a watcher thread in every rank
(torch._C._distributed_c10d._dump_fr_trace_file, files <TORCH_FR_DUMP_TEMP_FILE><rank>).  A rank whose GIL is held cannot run that thread; for the
gil_held scenario the launcher also fetches every rank's JSON dump from the C++ control-plane
handler `fr_trace_json` over a per-rank unix socket (torch._C._distributed_c10d._WorkerServer),
which needs no GIL.

Usage (from the repository root, with torch and megatron-core installed):
  python scripts/fr-fixtures/gloo_megatron_job.py --layout tp4pp2 --scenario healthy \
      --out tests/fixtures/torch_fr/gloo16/tp4pp2_healthy
  scripts/fr-fixtures/make_all.sh     # every layout x scenario
"""

import argparse
import ctypes
import datetime
import glob
import http.client
import json
import os
import pickle
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

WORLD = 16
LAYOUTS = {
    # name: (TP, PP, DP, default p2p mode)
    "tp4pp2": (4, 2, 2, "unbatched"),
    "tp2pp4": (2, 4, 2, "batched"),
}
SCENARIOS = ["healthy", "gil_held", "rank_killed", "stage_stall", "a2a_count_mismatch", "lagging_rank"]
NUM_EXPERTS = 16
TOPK = 2
HIDDEN = 64
TOKENS_PER_RANK = 4096  # sequence-parallel tokens per rank (seq_len / TP), micro batch 1
VOCAB_PER_TP_RANK = 32
DUMP_PREFIX = "comm_lib_trace_rank_"


def faulted_ranks(layout, scenario):
    tp, pp, dp, _ = LAYOUTS[layout]
    if scenario == "gil_held":
        return [9, 14]
    if scenario == "rank_killed":
        return [9]
    if scenario == "stage_stall":
        per_stage = tp * dp
        return list(range(per_stage, 2 * per_stage))  # every rank of pipeline stage 1
    if scenario == "a2a_count_mismatch":
        return [14]
    if scenario == "lagging_rank":
        return [5]
    return []


# ----------------------------------------------------------------------------------------- worker

class Job:
    def __init__(self, args):
        import torch
        import torch.distributed as dist

        self.torch = torch
        self.dist = dist
        self.C = torch._C._distributed_c10d
        self.args = args
        self.rank = args.rank
        self.work = args.workdir
        self.tp, self.pp, self.dp, default_p2p = LAYOUTS[args.layout]
        self.p2p_mode = args.p2p or default_p2p
        self.faulted = faulted_ranks(args.layout, args.scenario)
        self.fault_iter = args.iters - 1
        self.it = 0
        self.dumped = threading.Event()
        self.gil_lock = threading.Lock()
        self.gil_taken = False
        self.where = "start"  # the main thread's last step, for the fault notes

    # -- setup
    def init(self):
        torch, dist = self.torch, self.dist
        timeout = datetime.timedelta(seconds=self.args.pg_timeout_s)
        dist.init_process_group(
            "gloo",
            init_method=f"file://{self.work}/filestore",
            rank=self.rank,
            world_size=WORLD,
            timeout=timeout,
        )
        # C++ control-plane server on a unix socket: its handlers run on a C++ thread without the GIL.
        self.ctl = self.C._WorkerServer(os.path.join(self.work, f"ctl{self.rank}.sock"), -1)

        from megatron.core import parallel_state as ps

        self.ps = ps
        ep = self.tp * self.dp  # expert parallel over the TP*DP ranks of a stage, ETP=1
        ps.initialize_model_parallel(
            tensor_model_parallel_size=self.tp,
            pipeline_model_parallel_size=self.pp,
            expert_model_parallel_size=ep,
            expert_tensor_parallel_size=1,
            distributed_timeout_minutes=max(1, self.args.pg_timeout_s // 60),
        )
        self.g_tp = ps.get_tensor_model_parallel_group()
        self.g_pp = ps.get_pipeline_model_parallel_group()
        self.g_dp = ps.get_data_parallel_group(with_context_parallel=True)
        self.g_tp_cp = ps.get_tensor_and_context_parallel_group()
        self.g_ep = ps.get_expert_model_parallel_group()
        self.g_tp_ep = ps.get_expert_tensor_and_model_parallel_group()
        self.g_edp = ps.get_expert_data_parallel_group()
        self.g_mp = ps.get_model_parallel_group()
        self.g_tp_dp_cp = ps.get_tensor_and_data_parallel_group(with_context_parallel=True)
        self.g_emb = ps.get_embedding_group() if ps.is_rank_in_embedding_group() else None
        self.stage = ps.get_pipeline_model_parallel_rank()
        self.tp_rank = ps.get_tensor_model_parallel_rank()
        self.ep_rank = ps.get_expert_model_parallel_rank()
        self.ep_size = ps.get_expert_model_parallel_world_size()
        self.ep_ranks = dist.get_process_group_ranks(self.g_ep)
        self.next_rank = ps.get_pipeline_model_parallel_next_rank()
        self.prev_rank = ps.get_pipeline_model_parallel_prev_rank()
        self.first = ps.is_pipeline_first_stage()
        self.last = ps.is_pipeline_last_stage()
        self.local_experts = NUM_EXPERTS // self.ep_size
        torch.manual_seed(1234 + self.rank)
        self.w_expert = torch.randn(HIDDEN, HIDDEN) * 0.02
        self.dense_grad = torch.zeros(4096)
        self.expert_grad = torch.zeros(2048)

    # -- fault injection and dumps
    def mark_fault(self, what):
        tmp = os.path.join(self.work, f"tmp_fault_{self.rank}")
        with open(tmp, "w") as f:  # written whole, then renamed: readers never see it half-written
            f.write(f"{time.time()} {what} iteration={self.it}\n")
        os.rename(tmp, os.path.join(self.work, f"fault_{self.rank}"))
        self.log(f"FAULT {what} at iteration {self.it}")

    def fault_here(self, point, mb):
        """Called at each injection point; performs the scenario's fault on the faulted ranks."""
        sc = self.args.scenario
        self.where = f"iteration {self.it} microbatch {mb} {point}"
        if self.it != self.fault_iter or self.rank not in self.faulted:
            return
        if sc == "gil_held" and point == "before_dispatch" and mb == 1:
            self.hold_gil(f"at its injection point ({self.where})")
        elif sc == "rank_killed" and point == "before_dispatch" and mb == 1:
            self.mark_fault("SIGKILL self")
            os.kill(os.getpid(), signal.SIGKILL)
        elif sc == "stage_stall" and point == "forward_compute" and mb == 0:
            self.mark_fault("stalled in host compute (time.sleep 3600) with its whole stage")
            time.sleep(3600)
        elif sc == "lagging_rank" and point == "before_tp_allgather" and mb == 0:
            self.mark_fault(f"sleeping {self.args.lag_s}s before the TP all_gather")
            time.sleep(self.args.lag_s)

    def hold_gil(self, how):
        with self.gil_lock:
            if self.gil_taken:
                return
            self.gil_taken = True
        self.mark_fault(f"holding the GIL in a C call (PyDLL libc sleep), {how}")
        # ctypes.PyDLL does not release the GIL around the call: no Python thread of this rank runs
        # again (the main thread blocks as soon as it needs the GIL, e.g. on returning from a
        # collective's wait), while C++ threads (Gloo workers, control plane) go on.
        ctypes.PyDLL(None).sleep(3600)

    def gil_fault_thread(self):
        """gil_held: every faulted rank takes the GIL as soon as one of them has (within ~0.1 s),
        wherever its main thread is: ranks in different pipeline stages could not all reach the same
        program point, since the first one's fault stalls the stages after it."""
        while not glob.glob(os.path.join(self.work, "fault_*")):
            time.sleep(0.05)
        first = sorted(glob.glob(os.path.join(self.work, "fault_*")))[0]
        self.hold_gil(f"from a background thread after {os.path.basename(first)} appeared; "
                      f"main thread last at: {self.where}")

    def watcher(self):
        """Dumps this rank's Flight Recorder a few seconds after the first fault marker appears."""
        while True:
            markers = glob.glob(os.path.join(self.work, "fault_*"))
            if markers:
                break
            time.sleep(0.1)
        t0 = min(float(open(m).read().split()[0]) for m in markers if os.path.getsize(m) > 0)
        time.sleep(max(0.0, t0 + self.args.dump_delay_s - time.time()))
        self.dump("watcher")

    def dump(self, who):
        self.C._dump_fr_trace_file(
            self.rank, includeCollectives=True, includeStackTraces=False, onlyActive=False
        )
        open(os.path.join(self.work, f"dumped_{self.rank}"), "w").write(f"{time.time()} {who}\n")
        self.log(f"dumped Flight Recorder ({who})")
        self.dumped.set()

    def log(self, msg):
        print(f"[rank {self.rank}] {time.strftime('%H:%M:%S')} {msg}", flush=True)

    # -- P2P exactly as megatron/core/pipeline_parallel/p2p_communication.py
    def _batched_p2p_ops(self, send_prev, recv_prev, send_next, recv_next):
        dist = self.dist
        ops = []
        if send_prev is not None:
            ops.append(dist.P2POp(dist.isend, send_prev, self.prev_rank, self.g_pp))
        if recv_prev is not None:
            ops.append(dist.P2POp(dist.irecv, recv_prev, self.prev_rank, self.g_pp))
        if send_next is not None:
            ops.append(dist.P2POp(dist.isend, send_next, self.next_rank, self.g_pp))
        if recv_next is not None:
            ops.append(dist.P2POp(dist.irecv, recv_next, self.next_rank, self.g_pp))
        return dist.batch_isend_irecv(ops) if ops else []

    def _p2p_ops(self, send_prev, recv_prev, send_next, recv_next):
        dist = self.dist
        reqs = []
        even_send_odd_recv_group = self.g_pp
        if self.pp == 2:
            # Megatron: "Use the global process group for one of the two p2p communications to
            # allow the overlap of the independent communications."
            even_recv_odd_send_group = dist.group.WORLD
        else:
            even_recv_odd_send_group = self.g_pp
        if self.stage % 2 == 0:
            if send_next is not None:
                reqs.append(dist.isend(tensor=send_next, dst=self.next_rank, group=even_send_odd_recv_group))
            if recv_prev is not None:
                reqs.append(dist.irecv(tensor=recv_prev, src=self.prev_rank, group=even_recv_odd_send_group))
            if send_prev is not None:
                reqs.append(dist.isend(tensor=send_prev, dst=self.prev_rank, group=even_send_odd_recv_group))
            if recv_next is not None:
                reqs.append(dist.irecv(tensor=recv_next, src=self.next_rank, group=even_recv_odd_send_group))
        else:
            if recv_prev is not None:
                reqs.append(dist.irecv(tensor=recv_prev, src=self.prev_rank, group=even_send_odd_recv_group))
            if send_next is not None:
                reqs.append(dist.isend(tensor=send_next, dst=self.next_rank, group=even_recv_odd_send_group))
            if recv_next is not None:
                reqs.append(dist.irecv(tensor=recv_next, src=self.next_rank, group=even_send_odd_recv_group))
            if send_prev is not None:
                reqs.append(dist.isend(tensor=send_prev, dst=self.prev_rank, group=even_recv_odd_send_group))
        return reqs

    def communicate(self, send_next=None, send_prev=None, recv_prev=False, recv_next=False):
        torch = self.torch
        shape = (TOKENS_PER_RANK, 1, HIDDEN)
        t_recv_prev = torch.empty(shape, dtype=torch.bfloat16) if recv_prev else None
        t_recv_next = torch.empty(shape, dtype=torch.bfloat16) if recv_next else None
        fn = self._batched_p2p_ops if self.p2p_mode == "batched" else self._p2p_ops
        self.where = (f"iteration {self.it} p2p " + ", ".join(
            k for k, v in (("send_next", send_next), ("send_prev", send_prev),
                           ("recv_prev", recv_prev or None), ("recv_next", recv_next or None)) if v is not None))
        reqs = fn(send_prev, t_recv_prev, send_next, t_recv_next)
        for r in reqs:
            r.wait()
        return t_recv_prev, t_recv_next

    def recv_forward(self):
        return None if self.first else self.communicate(recv_prev=True)[0]

    def send_forward(self, t):
        if not self.last:
            self.communicate(send_next=t)

    def recv_backward(self):
        return None if self.last else self.communicate(recv_next=True)[1]

    def send_backward(self, t):
        if not self.first:
            self.communicate(send_prev=t)

    def send_forward_recv_backward(self, t):
        return None if self.last else self.communicate(send_next=t, recv_next=True)[1]

    def send_backward_recv_forward(self, t):
        return None if self.first else self.communicate(send_prev=t, recv_prev=True)[0]

    # -- model pieces
    def tp_all_gather(self, x):
        out = self.torch.empty((x.shape[0] * self.tp,) + tuple(x.shape[1:]), dtype=x.dtype)
        self.dist.all_gather_into_tensor(out, x, group=self.g_tp)
        return out

    def tp_reduce_scatter(self, x):
        out = self.torch.empty((x.shape[0] // self.tp,) + tuple(x.shape[1:]), dtype=x.dtype)
        self.dist.reduce_scatter_tensor(out, x, group=self.g_tp)
        return out

    def routing(self, mb):
        """Deterministic, uneven top-k routing of this rank's tokens for (iteration, microbatch)."""
        torch = self.torch
        g = torch.Generator().manual_seed(((self.it * 131 + mb) * 1009 + self.rank) & 0x7FFFFFFF)
        skew = torch.linspace(0.0, 1.5, NUM_EXPERTS)[torch.randperm(NUM_EXPERTS, generator=g)]
        logits = torch.randn(TOKENS_PER_RANK, NUM_EXPERTS, generator=g) + skew
        probs, experts = torch.topk(torch.softmax(logits, dim=-1), TOPK, dim=-1)
        counts = torch.bincount(experts.flatten(), minlength=NUM_EXPERTS)
        return probs.flatten(), counts

    def moe(self, x, mb):
        """Megatron MoEAlltoAllTokenDispatcher: count all_gather, dispatch a2a (tokens, probs), combine a2a."""
        torch, dist = self.torch, self.dist
        probs, counts = self.routing(mb)
        # router load-balancing loss: tokens per expert summed over the tensor(+context) group
        dist.all_reduce(counts.to(torch.float32), group=self.g_tp_cp)
        # preprocess: every rank's tokens-per-expert (gather_from_sequence_parallel_region on tp_ep)
        gathered = torch.empty(self.ep_size * NUM_EXPERTS, dtype=torch.int64)
        dist.all_gather_into_tensor(gathered, counts, group=self.g_tp_ep)
        per_rank = gathered.view(self.ep_size, self.ep_size, self.local_experts).sum(-1)  # [src, dst]
        input_splits = per_rank[self.ep_rank].tolist()
        output_splits = per_rank[:, self.ep_rank].tolist()
        self.fault_here("before_dispatch", mb)
        if self.args.scenario == "a2a_count_mismatch" and self.it == self.fault_iter and mb == 1 \
                and self.rank in self.faulted:
            # wrong send counts (the total is unchanged): one row less to the last peer, one more to
            # the first, which expects exactly what the count all_gather told it.
            a, b = self.ep_size - 1, 0
            if a == self.ep_rank:
                a -= 1
            if b == self.ep_rank:
                b += 1
            input_splits[a] -= 1
            input_splits[b] += 1
            self.mark_fault(
                f"dispatch all_to_all_single with wrong input_splits: rank {self.ep_ranks[b]} gets "
                f"{input_splits[b]} rows (expects {input_splits[b] - 1}), rank {self.ep_ranks[a]} gets "
                f"{input_splits[a]} (expects {input_splits[a] + 1})"
            )
        n_in = sum(input_splits)
        n_out = sum(output_splits)
        tokens = x.reshape(-1, HIDDEN).repeat_interleave(TOPK, dim=0)[:n_in]
        if tokens.shape[0] < n_in:
            tokens = torch.cat([tokens, tokens[: n_in - tokens.shape[0]]])
        p = probs[:n_in] if probs.numel() >= n_in else torch.cat([probs, probs[: n_in - probs.numel()]])
        global_tokens = torch.empty(n_out, HIDDEN, dtype=tokens.dtype)
        dist.all_to_all_single(global_tokens, tokens, output_splits, input_splits, group=self.g_ep)
        global_probs = torch.empty(n_out, dtype=torch.float32)
        dist.all_to_all_single(global_probs, p.contiguous(), output_splits, input_splits, group=self.g_ep)
        expert_out = (global_tokens.float() @ self.w_expert * global_probs[:, None]).to(tokens.dtype)
        combined = torch.empty(n_in, HIDDEN, dtype=tokens.dtype)
        dist.all_to_all_single(combined, expert_out, input_splits, output_splits, group=self.g_ep)
        self.moe_splits.append((input_splits, output_splits))  # for this microbatch's backward
        return combined[: x.numel() // HIDDEN].reshape(x.shape)

    def moe_backward(self, g):
        torch, dist = self.torch, self.dist
        input_splits, output_splits = self.moe_splits.pop(0)  # 1F1B: backward in forward order
        n_in, n_out = sum(input_splits), sum(output_splits)
        gtok = g.reshape(-1, HIDDEN).repeat_interleave(TOPK, dim=0)[:n_in]
        if gtok.shape[0] < n_in:
            gtok = torch.cat([gtok, gtok[: n_in - gtok.shape[0]]])
        g_expert = torch.empty(n_out, HIDDEN, dtype=g.dtype)  # combine backward
        dist.all_to_all_single(g_expert, gtok.contiguous(), output_splits, input_splits, group=self.g_ep)
        g_probs = g_expert.float().sum(-1)
        g_probs_back = torch.empty(n_in, dtype=torch.float32)  # probs dispatch backward
        dist.all_to_all_single(g_probs_back, g_probs, input_splits, output_splits, group=self.g_ep)
        g_tokens = torch.empty(n_in, HIDDEN, dtype=g.dtype)  # token dispatch backward
        dist.all_to_all_single(g_tokens, g_expert, input_splits, output_splits, group=self.g_ep)
        self.expert_grad += g_probs_back[:2048].sum()
        return g_tokens[: g.numel() // HIDDEN].reshape(g.shape)

    def forward_step(self, x, mb):
        torch, dist = self.torch, self.dist
        self.fault_here("forward_compute", mb)
        if x is None:  # first stage: embedding lookup of this rank's sequence shard
            g = torch.Generator().manual_seed(self.it * 7 + mb)
            x = (torch.randn(TOKENS_PER_RANK, 1, HIDDEN, generator=g) * 0.1).to(torch.bfloat16)
        self.fault_here("before_tp_allgather", mb)
        full = self.tp_all_gather(x)  # sequence-parallel gather before attention
        attn = (full.float() * 0.5).to(torch.bfloat16)
        x = x + self.tp_reduce_scatter(attn)  # row-parallel output projection
        x = x + self.moe(x, mb)
        if self.last:  # vocab-parallel cross entropy: max, predicted logit, sum of exp over TP
            logits = x.float().reshape(TOKENS_PER_RANK, -1)[:, :VOCAB_PER_TP_RANK]
            m = logits.max(dim=-1)[0]
            dist.all_reduce(m, op=dist.ReduceOp.MAX, group=self.g_tp)
            pred = logits[:, 0].contiguous()
            dist.all_reduce(pred, group=self.g_tp)
            sexp = torch.exp(logits - m[:, None]).sum(-1)
            dist.all_reduce(sexp, group=self.g_tp)
            self.losses.append(float((torch.log(sexp) + m - pred).mean()))
        return x

    def backward_step(self, x, grad):
        torch = self.torch
        if grad is None:  # last stage: gradient of the loss
            grad = torch.full_like(x, 1e-3)
        g = grad + self.moe_backward(grad)
        g_full = self.tp_all_gather(g)  # backward of the reduce-scatter
        g = g + self.tp_reduce_scatter(g_full)  # backward of the all-gather
        self.dense_grad += float(g.float().mean())
        return g

    def iteration(self):
        torch, dist = self.torch, self.dist
        M = self.args.microbatches
        self.losses = []
        self.moe_splits = []
        if self.first or self.last:  # get_batch: tokens and labels broadcast over TP
            for _ in range(2):
                batch = torch.arange(TOKENS_PER_RANK * self.tp, dtype=torch.int64).reshape(1, -1)
                dist.broadcast(batch, src=dist.get_process_group_ranks(self.g_tp)[0], group=self.g_tp)
        # forward_backward_pipelining_without_interleaving (1F1B)
        warmup = min(self.pp - self.stage - 1, M)
        remaining = M - warmup
        inputs, outputs = [], []
        fwd_mb = bwd_mb = 0
        for _ in range(warmup):
            x = self.recv_forward()
            y = self.forward_step(x, fwd_mb)
            fwd_mb += 1
            self.send_forward(y)
            inputs.append(x)
            outputs.append(y)
        x = self.recv_forward() if remaining > 0 else None
        for i in range(remaining):
            y = self.forward_step(x, fwd_mb)
            fwd_mb += 1
            inputs.append(x)
            outputs.append(y)
            grad = self.send_forward_recv_backward(y)
            outputs.pop(0)
            inputs.pop(0)
            g = self.backward_step(y, grad)
            bwd_mb += 1
            if i == remaining - 1:
                x = None
                self.send_backward(g)
            else:
                x = self.send_backward_recv_forward(g)
        for _ in range(warmup):
            y = outputs.pop(0)
            inputs.pop(0)
            grad = self.recv_backward()
            g = self.backward_step(y, grad)
            bwd_mb += 1
            self.send_backward(g)
        # finalize_model_grads + optimizer step
        dist.all_reduce(self.dense_grad, group=self.g_dp)
        dist.all_reduce(self.expert_grad, group=self.g_edp)
        if self.g_emb is not None:
            dist.all_reduce(self.dense_grad[:1024].contiguous(), group=self.g_emb)
        norm = torch.tensor([float(self.dense_grad.norm())])
        dist.all_reduce(norm, group=self.g_mp)
        aux = torch.ones(NUM_EXPERTS)  # MoE aux-loss tracker
        dist.all_reduce(aux, group=self.g_tp_dp_cp)
        if self.last:
            loss = torch.tensor([sum(self.losses) / max(1, len(self.losses))])
            dist.all_reduce(loss, group=self.g_dp)

    def run(self):
        self.init()
        if self.args.scenario != "healthy":
            threading.Thread(target=self.watcher, daemon=True).start()
        if self.args.scenario == "gil_held" and self.rank in self.faulted:
            threading.Thread(target=self.gil_fault_thread, daemon=True).start()
        self.log(
            f"stage {self.stage} tp_rank {self.tp_rank} ep_rank {self.ep_rank} ep_ranks {self.ep_ranks} "
            f"p2p {self.p2p_mode}"
        )
        try:
            for self.it in range(self.args.iters):
                self.iteration()
                self.log(f"iteration {self.it} done")
        except Exception as e:  # Gloo reports a dead or misbehaving peer as an error in the call
            self.log("ERROR " + str(e).splitlines()[0][:300])
            with open(os.path.join(self.work, f"error_{self.rank}"), "w") as f:
                f.write(traceback.format_exc())
        if self.args.scenario == "healthy":
            # a quiet point: every rank past its last collective, the Gloo worker threads have retired
            # every entry (they do so after completing the caller's future)
            self.dist.barrier()
            time.sleep(2.0)
            self.dump("on demand, healthy")
            self.dist.barrier()
            return
        # keep the rank (and its sockets) alive until the launcher has every dump and ends the job
        while True:
            time.sleep(1)


def worker_main(args):
    os.environ["TORCH_FR_BUFFER_SIZE"] = str(args.buffer)
    os.environ["TORCH_FR_DUMP_TEMP_FILE"] = os.path.join(args.workdir, DUMP_PREFIX)
    import warnings

    warnings.filterwarnings("ignore")
    Job(args).run()


# --------------------------------------------------------------------------------------- launcher

class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=10):
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


def control_plane(work, rank, handler):
    conn = UnixHTTPConnection(os.path.join(work, f"ctl{rank}.sock"))
    conn.request("POST", f"/handler/{handler}")
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp.status, body


def summarize_dump(path):
    with open(path, "rb") as f:
        head = f.read(1)
    if head == b"{":
        d = json.load(open(path))
    else:
        d = pickle.load(open(path, "rb"))
    entries = d.get("entries", [])
    open_entries = [e for e in entries if not e["retired"]]
    last = entries[-1] if entries else None
    return {
        "entries": len(entries),
        "open": [
            f"{e['process_group'][1]}#{e['collective_seq_id']} {e['profiling_name']}" for e in open_entries
        ],
        "last": f"{last['process_group'][1]}#{last['collective_seq_id']} {last['profiling_name']}"
        + (" (retired)" if last["retired"] else " (open)")
        if last
        else None,
        "pg_status": d.get("pg_status"),
    }


def launch(args):
    out = os.path.abspath(args.out)
    work = tempfile.mkdtemp(prefix="frjob-")
    faulted = faulted_ranks(args.layout, args.scenario)
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    env["PYTHONWARNINGS"] = "ignore"
    procs = {}
    t_start = time.time()
    for r in range(WORLD):
        cmd = [
            sys.executable, os.path.abspath(__file__), "--worker", "--rank", str(r),
            "--workdir", work, "--layout", args.layout, "--scenario", args.scenario,
            "--iters", str(args.iters), "--microbatches", str(args.microbatches),
            "--buffer", str(args.buffer), "--pg-timeout-s", str(args.pg_timeout_s),
            "--dump-delay-s", str(args.dump_delay_s), "--lag-s", str(args.lag_s),
        ]
        if args.p2p:
            cmd += ["--p2p", args.p2p]
        logf = open(os.path.join(work, f"rank{r}.log"), "w")
        procs[r] = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, env=env)
    print(f"launched 16 ranks, work dir {work}", flush=True)

    json_dir = None
    deadline = t_start + args.deadline_s
    json_taken = False
    while time.time() < deadline:
        markers = glob.glob(os.path.join(work, "fault_*"))
        if markers:  # after a fault: the dumps, then the end of the job
            t0 = min(float(open(m).read().split()[0]) for m in markers if os.path.getsize(m) > 0)
            deadline = min(deadline, t0 + args.dump_delay_s + 30.0)
        alive = [r for r, p in procs.items() if p.poll() is None]
        dumped = {int(os.path.basename(p)[len("dumped_"):]) for p in glob.glob(os.path.join(work, "dumped_*"))}
        if args.scenario == "gil_held" and markers and not json_taken:
            if time.time() >= t0 + args.dump_delay_s:
                json_dir = out + "_cpp_json"
                shutil.rmtree(json_dir, ignore_errors=True)
                os.makedirs(json_dir)
                with open(os.path.join(json_dir, "faulted_ranks.txt"), "w") as f:
                    f.write(" ".join(str(r) for r in faulted) + "\n")
                for r in range(WORLD):
                    try:
                        status, body = control_plane(work, r, "fr_trace_json")
                        if status == 200:
                            open(os.path.join(json_dir, f"{DUMP_PREFIX}{r}"), "wb").write(body)
                        print(f"control plane fr_trace_json rank {r}: HTTP {status}", flush=True)
                    except Exception as e:
                        print(f"control plane fr_trace_json rank {r}: {e}", flush=True)
                json_taken = True
        if not alive:
            break
        # done when every living rank has dumped (a GIL-held rank never does: give it the delay again)
        if markers and all(r in dumped for r in alive if r not in faulted or args.scenario != "gil_held"):
            if args.scenario != "gil_held" or json_taken:
                time.sleep(1.0)
                break
        time.sleep(0.2)
    exit_codes = {}
    for r, p in procs.items():
        if p.poll() is not None:
            rc = p.returncode
            exit_codes[r] = f"exited by itself, {'signal ' + signal.Signals(-rc).name if rc < 0 else 'code ' + str(rc)}"
    for r, p in procs.items():  # SIGKILL every rank left first, then reap: no rank sees the others go
        if r not in exit_codes:
            p.kill()
    for r, p in procs.items():
        p.wait()
        exit_codes.setdefault(r, "alive at the end (killed by the launcher after the dumps)")
    elapsed = time.time() - t_start

    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    for path in sorted(glob.glob(os.path.join(work, DUMP_PREFIX + "*"))):
        shutil.copy(path, os.path.join(out, os.path.basename(path)))
    with open(os.path.join(out, "faulted_ranks.txt"), "w") as f:
        f.write(" ".join(str(r) for r in faulted) + "\n")

    # job.log: what each rank did, in the launcher's words and the ranks' own last lines
    lines = [
        f"layout {args.layout} scenario {args.scenario} p2p {args.p2p or LAYOUTS[args.layout][3]} "
        f"iterations {args.iters} microbatches {args.microbatches} TORCH_FR_BUFFER_SIZE {args.buffer} "
        f"pg timeout {args.pg_timeout_s}s dump delay {args.dump_delay_s}s, wall {elapsed:.0f}s",
    ]
    for m in sorted(glob.glob(os.path.join(work, "fault_*"))):
        lines.append(f"fault rank {os.path.basename(m)[6:]}: " + open(m).read().split(" ", 1)[1].strip())
    for r in range(WORLD):
        log = open(os.path.join(work, f"rank{r}.log")).read().splitlines()
        interesting = [
            l.split("] ", 1)[-1] for l in log
            if ("ERROR" in l or "FAULT" in l or "dumped" in l or "terminate" in l or "what()" in l)
        ]
        its = [l for l in log if "iteration" in l and "done" in l]
        lines.append(
            f"rank {r:2d}: {exit_codes[r]}; iterations completed {len(its)}; "
            + "; ".join(s.strip()[:240] for s in interesting)
        )
    with open(os.path.join(out, "job.log"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    for r in range(WORLD):
        p = os.path.join(out, f"{DUMP_PREFIX}{r}")
        if os.path.exists(p):
            s = summarize_dump(p)
            print(f"rank {r:2d}: {s['entries']} entries, last {s['last']}, open {s['open']}")
        else:
            print(f"rank {r:2d}: no dump")
    if not args.keep_workdir:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print("work dir kept:", work)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layout", choices=sorted(LAYOUTS), default="tp4pp2")
    ap.add_argument("--scenario", choices=SCENARIOS, default="healthy")
    ap.add_argument("--out", help="output folder for the dumps (launcher)")
    ap.add_argument("--iters", type=int, default=3, help="training iterations; faults in the last one")
    ap.add_argument("--microbatches", type=int, default=2)
    ap.add_argument("--p2p", choices=["batched", "unbatched"], default=None,
                    help="Megatron _batched_p2p_ops or _p2p_ops (default: unbatched for PP=2, batched for PP=4)")
    ap.add_argument("--buffer", type=int, default=40, help="TORCH_FR_BUFFER_SIZE (ring entries)")
    ap.add_argument("--pg-timeout-s", type=int, default=120)
    ap.add_argument("--dump-delay-s", type=float, default=8.0, help="dump this long after the fault")
    ap.add_argument("--lag-s", type=float, default=40.0, help="lagging_rank: how long the rank sleeps")
    ap.add_argument("--deadline-s", type=float, default=600.0,
                    help="launcher: end the job after this long (and at most 30 s after the dumps were due)")
    ap.add_argument("--keep-workdir", action="store_true")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--workdir", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker_main(args)
    else:
        if not args.out:
            ap.error("--out is required")
        launch(args)


if __name__ == "__main__":
    main()
