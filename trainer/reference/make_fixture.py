#!/usr/bin/python3
"""make_fixture.py — writes the PyTorch reference fixture that tests/trainer checks the C++ GPT-2 against.

Is: an independent GPT-2 (the same math as trainer/model/gpt2.cpp, written with plain torch ops in
float64 on the CPU) for a small model with fixed weights and data, and a writer of:
  tests/fixtures/trainer/gpt2_small_model.bin      llm.c model file (magic 20240326, version 3, fp32)
  tests/fixtures/trainer/gpt2_small_reference.bin  inputs, targets, logits, loss, every gradient,
                                                   the gradient norm and the losses of 10 AdamW steps
The layout of the reference file is documented in tests/fixtures/trainer/README.md.
Is not: needed by ./test.sh (the outputs are committed). Regenerate with
  python3 trainer/reference/make_fixture.py            (Debian: apt-get install python3-torch)

The model: V=500 (so Vp=512 has 12 padding logits that must not enter the softmax), maxT=32,
L=2, NH=4, C=64, B=2, T=16. Weights are float32 values (so the C++ side starts from exactly the
same numbers); the reference computes in float64, so it is the exact answer to ~1e-12 and the
fp32 C++ results are compared at abs <= 1e-4.
"""
import argparse
import math
import os
import struct

import torch
import torch.nn.functional as F

V, VP, MAXT, L, NH, C = 500, 512, 32, 2, 4, 64
B, T = 2, 16
STEPS = 10
LR, BETA1, BETA2, EPS, WD = 1e-3, 0.9, 0.999, 1e-8, 0.1
SEED = 1234

# llm.c tensor order: (name, shape) with per-layer tensors stacked over L.
LLMC_ORDER = [
    ("wte", (VP, C)), ("wpe", (MAXT, C)),
    ("ln1w", (L, C)), ("ln1b", (L, C)), ("qkvw", (L, 3 * C, C)), ("qkvb", (L, 3 * C)),
    ("attprojw", (L, C, C)), ("attprojb", (L, C)), ("ln2w", (L, C)), ("ln2b", (L, C)),
    ("fcw", (L, 4 * C, C)), ("fcb", (L, 4 * C)), ("fcprojw", (L, C, 4 * C)), ("fcprojb", (L, C)),
    ("lnfw", (C,)), ("lnfb", (C,)),
]


def make_weights(gen):
    """Random float32-representable weights; LN weights near 1, biases non-zero so every gradient matters."""
    w = {}
    for name, shape in LLMC_ORDER:
        if name in ("ln1w", "ln2w", "lnfw"):
            t = 1.0 + 0.1 * torch.randn(shape, generator=gen, dtype=torch.float64)
        elif name.endswith("b"):
            t = 0.02 * torch.randn(shape, generator=gen, dtype=torch.float64)
        elif name in ("attprojw", "fcprojw"):
            t = 0.02 / math.sqrt(2 * L) * torch.randn(shape, generator=gen, dtype=torch.float64)
        else:
            t = 0.05 * torch.randn(shape, generator=gen, dtype=torch.float64)
        if name == "wte":
            t[V:] = 0.0  # padding rows
        w[name] = t.float().double().requires_grad_(True)  # exactly representable in fp32
    return w


def forward(w, idx, targets):
    """GPT-2 forward; returns (logits over the real vocabulary (B,T,V), mean loss)."""
    hs = C // NH
    x = w["wte"][idx] + w["wpe"][:T].unsqueeze(0)
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for l in range(L):
        h = F.layer_norm(x, (C,), w["ln1w"][l], w["ln1b"][l], 1e-5)
        qkv = h @ w["qkvw"][l].T + w["qkvb"][l]
        q, k, v = qkv.split(C, dim=-1)
        q = q.view(B, T, NH, hs).transpose(1, 2)
        k = k.view(B, T, NH, hs).transpose(1, 2)
        v = v.view(B, T, NH, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + y @ w["attprojw"][l].T + w["attprojb"][l]
        h = F.layer_norm(x, (C,), w["ln2w"][l], w["ln2b"][l], 1e-5)
        f = F.gelu(h @ w["fcw"][l].T + w["fcb"][l], approximate="tanh")
        x = x + f @ w["fcprojw"][l].T + w["fcprojb"][l]
    x = F.layer_norm(x, (C,), w["lnfw"], w["lnfb"], 1e-5)
    logits = (x @ w["wte"].T)[..., :V]  # padded columns excluded from the softmax
    loss = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))
    return logits, loss


def flat(tensors):
    return torch.cat([tensors[name].reshape(-1) for name, _ in LLMC_ORDER])


def write_floats(f, t):
    data = t.detach().to(torch.float32).contiguous().numpy().tobytes()
    f.write(data)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default_out = os.path.join(here, "..", "..", "tests", "fixtures", "trainer")
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=default_out, help="output folder (default: %(default)s)")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)

    gen = torch.Generator().manual_seed(SEED)
    w = make_weights(gen)
    tokens = torch.randint(0, V, (B, T + 1), generator=gen)
    idx, targets = tokens[:, :T], tokens[:, 1:]

    # 1. llm.c model file with the initial weights.
    header = [0] * 256
    header[0:8] = [20240326, 3, MAXT, V, L, NH, C, VP]
    with open(os.path.join(args.out, "gpt2_small_model.bin"), "wb") as f:
        f.write(struct.pack("<256i", *header))
        write_floats(f, flat(w))

    # 2. Logits, loss and gradients of the first forward/backward.
    logits, loss = forward(w, idx, targets)
    loss.backward()
    grads = {name: w[name].grad.clone() for name, _ in LLMC_ORDER}
    grad_norm = torch.sqrt(sum((g * g).sum() for g in grads.values()))

    # 3. Ten AdamW steps on the same batch (decay on 2-D weights only, as llm.c and the trainer).
    params = [w[name] for name, _ in LLMC_ORDER]
    # Stacked per-layer 1-D parameters are (L, n) here but 1-D per layer in the model: no decay.
    decay = [w[n] for n in ("wte", "wpe", "qkvw", "attprojw", "fcw", "fcprojw")]
    no_decay = [p for p in params if all(p is not d for d in decay)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WD}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=LR, betas=(BETA1, BETA2), eps=EPS)
    for p in params:
        p.grad = None
    step_losses = []
    for _ in range(STEPS):
        opt.zero_grad(set_to_none=True)
        _, step_loss = forward(w, idx, targets)
        step_loss.backward()
        step_losses.append(step_loss.item())
        opt.step()

    ref_header = [0] * 64
    ref_header[0:16] = [20251122, 1, B, T, V, VP, L, NH, C, MAXT, STEPS, 0, 0, 0, 0, 0]
    with open(os.path.join(args.out, "gpt2_small_reference.bin"), "wb") as f:
        f.write(struct.pack("<64i", *ref_header))
        f.write(struct.pack("<4f", LR, BETA1, BETA2, EPS))
        f.write(struct.pack("<4f", WD, 0.0, 0.0, 0.0))
        f.write(struct.pack(f"<{B * T}i", *idx.reshape(-1).tolist()))
        f.write(struct.pack(f"<{B * T}i", *targets.reshape(-1).tolist()))
        write_floats(f, logits)
        f.write(struct.pack("<2f", loss.item(), grad_norm.item()))
        write_floats(f, flat(grads))
        f.write(struct.pack(f"<{STEPS}f", *step_losses))
    print(f"loss {loss.item():.6f} grad_norm {grad_norm.item():.6f} "
          f"losses after AdamW: {' '.join(f'{x:.5f}' for x in step_losses)}")


if __name__ == "__main__":
    main()
