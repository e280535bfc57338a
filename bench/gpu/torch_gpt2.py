#!/usr/bin/env python3
# torch_gpt2.py — the PyTorch side of the GPU comparison: a GPT-2 124M of our own, same
# B, T, bf16 autocast, fused AdamW, timed eager and under torch.compile, one line per mode in
# gpt2_gpu_bench's format so bench/gpu/make_speed_table.py puts them in one table.
#
# Is: a measurement harness, small on purpose: synthetic tokens, no data loading, no checkpoint.
# Is not: a reference for our numerics (the CPU backend is), nor run in CI (torch is not installed
# there); the table maker's parser is tested instead (tests/tools/speed_table_test).
#
#   python3 bench/gpu/torch_gpt2.py --batch 16 --seq 1024 --steps 20 --warmup 5 --modes eager,compile
import argparse
import math
import sys
import time

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    print("torch_gpt2: skipped: python3 cannot import torch")
    sys.exit(0)

PEAK_BF16_TFLOPS = {"H100": 989.4, "H200": 989.4, "A100": 312.0}  # dense, as gpt2_gpu_bench uses


class Block(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.NH = NH
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.c_attn, self.attn_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        # (B, NH, T, hs) each; SDPA picks FlashAttention on an H100.
        q, k, v = (t.view(B, T, self.NH, C // self.NH).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.attn_proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self, L=12, NH=12, C=768, V=50304, max_T=1024):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(max_T, C)
        self.blocks = nn.ModuleList(Block(C, NH) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, V, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as GPT-2 (and ours)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * L) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


def measure(mode, args, device):
    torch.manual_seed(0)
    model = GPT2(max_T=max(1024, args.seq)).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4, weight_decay=0.1, fused=True)
    step_fn = torch.compile(model) if mode == "compile" else model
    gen = torch.Generator(device=device).manual_seed(1)
    idx = torch.randint(0, 50257, (args.batch, args.seq + 1), device=device, generator=gen)
    x, y = idx[:, :-1].contiguous(), idx[:, 1:].contiguous()
    torch.cuda.reset_peak_memory_stats(device)

    def step():
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            loss = step_fn(x, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize(device)
    start = time.perf_counter()
    for _ in range(args.steps):
        loss = step()
    torch.cuda.synchronize(device)
    seconds = time.perf_counter() - start
    return n_params, seconds, float(loss), torch.cuda.max_memory_allocated(device)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--modes", default="eager,compile")
    ap.add_argument("--peak-tflops", type=float, default=0.0)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("torch_gpt2: skipped: torch sees no CUDA device")
        return 0
    device = torch.device("cuda")
    name = torch.cuda.get_device_name(device)
    peak = args.peak_tflops or next((v for k, v in PEAK_BF16_TFLOPS.items() if k in name), 0.0)
    L, C, T = 12, 768, args.seq
    header_printed = False
    for mode in args.modes.split(","):
        n_params, seconds, loss, peak_mem = measure(mode, args, device)
        if not header_printed:
            print(f"torch_gpt2: {name} | torch {torch.__version__} | d12 T={T} B={args.batch} precision=bf16 "
                  f"attention=sdpa | {n_params / 1e6:.1f}M parameters")
            header_printed = True
        tps = args.batch * T * args.steps / seconds
        flops_per_token = 6.0 * n_params + 6.0 * L * C * T
        mfu = f"{100.0 * tps * flops_per_token / (peak * 1e12):.2f}%" if peak else "n/a"
        print(f"  torch {mode:<7}: {tps:10.0f} tokens/s  {1e3 * seconds / args.steps:7.2f} ms/step  MFU {mfu}"
              f"  peak {peak_mem / 2**30:.2f} GiB  loss {loss:.3f}")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
