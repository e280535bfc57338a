#!/usr/bin/python3
"""make_moe_fixture.py — writes the PyTorch reference fixture for the C++ GPT-2 with MoE MLP blocks.

Is: an independent GPT-2 whose MoE blocks are written with plain torch ops in float64 on the CPU
(router softmax over all E logits, top-K with ties to the lower index, K=1 gate = probability,
K=2 gates renormalised among the two, capacity ceil(N*K/E*F) per expert keeping the earliest
slots n*K+k, Switch/GShard aux loss A*E*sum_i f_i*P_i with f_i counted before drops, experts =
GPT-2 MLPs), and a writer of tests/fixtures/trainer/moe_small_reference.bin: the parameter names
and initial weights in the C++ ParameterSet order (EP=1, TP=1), inputs, targets, and for each of
four cases (top-1 / top-2, dropless / capacity factor 1.0): logits, loss (cross-entropy + aux),
the global gradient norm, every gradient (router included) and the losses of 10 AdamW steps.
The layout is in tests/fixtures/trainer/README.md.
Is not: needed by ./test.sh (the output is committed). Regenerate with
  python3 trainer/reference/make_moe_fixture.py        (Debian: apt-get install python3-torch)

Model: V=100 (Vp=128), maxT=16, L=2, NH=2, C=16, B=2, T=8, E=4 experts, MoE in block 0 only
(--moe-every 2), aux loss coefficient 0.01. Weights are float32 values; the reference computes in
float64, and the C++ fp32 results are compared at abs <= 1e-4.
"""
import argparse
import math
import os
import struct

import torch
import torch.nn.functional as F

V, VP, MAXT, L, NH, C = 100, 128, 16, 2, 2, 16
B, T = 2, 8
E, EVERY, AUX = 4, 2, 0.01
STEPS = 10
LR, BETA1, BETA2, EPS, WD = 1e-3, 0.9, 0.999, 1e-8, 0.1
SEED = 4321
CASES = [(1, 0.0), (2, 0.0), (1, 1.0), (2, 1.0)]  # (top_k, capacity factor)


def is_moe(l):
    return l % EVERY == 0


def param_list():
    """(name, shape) in the C++ ParameterSet order for EP=1, TP=1."""
    out = [("wte.weight", (VP, C)), ("wpe.weight", (MAXT, C))]
    for l in range(L):
        p = f"h.{l}."
        out += [(p + "ln_1.weight", (C,)), (p + "ln_1.bias", (C,)),
                (p + "attn.c_attn.weight", (3 * C, C)), (p + "attn.c_attn.bias", (3 * C,)),
                (p + "attn.c_proj.weight", (C, C)), (p + "attn.c_proj.bias", (C,)),
                (p + "ln_2.weight", (C,)), (p + "ln_2.bias", (C,))]
        if is_moe(l):
            out.append((p + "mlp.router.weight", (E, C)))
            for e in range(E):
                q = f"{p}mlp.experts.{e}."
                out += [(q + "c_fc.weight", (4 * C, C)), (q + "c_fc.bias", (4 * C,)),
                        (q + "c_proj.weight", (C, 4 * C)), (q + "c_proj.bias", (C,))]
        else:
            out += [(p + "mlp.c_fc.weight", (4 * C, C)), (p + "mlp.c_fc.bias", (4 * C,)),
                    (p + "mlp.c_proj.weight", (C, 4 * C)), (p + "mlp.c_proj.bias", (C,))]
    out += [("ln_f.weight", (C,)), ("ln_f.bias", (C,))]
    return out


def make_weights(gen):
    """float32-representable weights; LN weights near 1, biases non-zero so every gradient matters.
    The router is larger than GPT-2's init so the routing is decisive (no near-ties between the
    fp32 and fp64 top-k)."""
    w = {}
    for name, shape in param_list():
        if name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
            t = 1.0 + 0.1 * torch.randn(shape, generator=gen, dtype=torch.float64)
        elif name.endswith("bias"):
            t = 0.02 * torch.randn(shape, generator=gen, dtype=torch.float64)
        elif name.endswith("router.weight"):
            t = 0.5 * torch.randn(shape, generator=gen, dtype=torch.float64)
        elif name.endswith("c_proj.weight"):
            t = 0.02 / math.sqrt(2 * L) * torch.randn(shape, generator=gen, dtype=torch.float64) * 5
        else:
            t = 0.05 * torch.randn(shape, generator=gen, dtype=torch.float64)
        if name == "wte.weight":
            t[V:] = 0.0  # padding rows
        w[name] = t.float().double().requires_grad_(True)
    return w


def mlp(x, fc_w, fc_b, proj_w, proj_b):
    return F.gelu(x @ fc_w.T + fc_b, approximate="tanh") @ proj_w.T + proj_b


def moe(w, l, x, top_k, capacity):
    """x (N,C) -> (out (N,C), aux loss) for MoE block l."""
    n = x.shape[0]
    p = f"h.{l}.mlp."
    probs = (x @ w[p + "router.weight"].T).softmax(dim=-1)  # (N,E)
    # Top-k on the values (detached, ties to the lower index as the C++ router does).
    pv = probs.detach()
    chosen = []
    for t in range(n):
        order = sorted(range(E), key=lambda e: (-pv[t, e].item(), e))
        chosen.append(order[:top_k])
    routed = [0] * E
    for t in range(n):
        for e in chosen[t]:
            routed[e] += 1
    kept = [[True] * top_k for _ in range(n)]
    if capacity > 0:
        cap = math.ceil(n * top_k / E * capacity)
        used = [0] * E
        for t in range(n):  # slot order t*K + k
            for k in range(top_k):
                e = chosen[t][k]
                if used[e] < cap:
                    used[e] += 1
                else:
                    kept[t][k] = False
    out_rows = []
    for t in range(n):
        sel = probs[t, chosen[t]]
        gates = sel if top_k == 1 else sel / sel.sum()
        y = torch.zeros(C, dtype=torch.float64)
        for k in range(top_k):
            if not kept[t][k]:
                continue
            e = chosen[t][k]
            q = f"{p}experts.{e}."
            y = y + gates[k] * mlp(x[t], w[q + "c_fc.weight"], w[q + "c_fc.bias"], w[q + "c_proj.weight"],
                                   w[q + "c_proj.bias"])
        out_rows.append(y)
    f = torch.tensor(routed, dtype=torch.float64) / (n * top_k)
    aux = AUX * E * (f * probs.mean(dim=0)).sum()
    return torch.stack(out_rows), aux


def forward(w, idx, targets, top_k, capacity):
    hs = C // NH
    x = w["wte.weight"][idx] + w["wpe.weight"][:T].unsqueeze(0)
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    aux_total = torch.zeros((), dtype=torch.float64)
    for l in range(L):
        p = f"h.{l}."
        h = F.layer_norm(x, (C,), w[p + "ln_1.weight"], w[p + "ln_1.bias"], 1e-5)
        qkv = h @ w[p + "attn.c_attn.weight"].T + w[p + "attn.c_attn.bias"]
        q, k, v = qkv.split(C, dim=-1)
        q = q.view(B, T, NH, hs).transpose(1, 2)
        k = k.view(B, T, NH, hs).transpose(1, 2)
        v = v.view(B, T, NH, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + y @ w[p + "attn.c_proj.weight"].T + w[p + "attn.c_proj.bias"]
        h = F.layer_norm(x, (C,), w[p + "ln_2.weight"], w[p + "ln_2.bias"], 1e-5)
        if is_moe(l):
            out, aux = moe(w, l, h.reshape(B * T, C), top_k, capacity)
            x = x + out.reshape(B, T, C)
            aux_total = aux_total + aux
        else:
            x = x + mlp(h, w[p + "mlp.c_fc.weight"], w[p + "mlp.c_fc.bias"], w[p + "mlp.c_proj.weight"],
                        w[p + "mlp.c_proj.bias"])
    x = F.layer_norm(x, (C,), w["ln_f.weight"], w["ln_f.bias"], 1e-5)
    logits = (x @ w["wte.weight"].T)[..., :V]
    loss = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1)) + aux_total
    return logits, loss


def write_floats(f, t):
    f.write(t.detach().to(torch.float32).contiguous().numpy().tobytes())


def flat(tensors):
    return torch.cat([tensors[name].reshape(-1) for name, _ in param_list()])


def run_case(w0, idx, targets, top_k, capacity):
    w = {k: v.detach().clone().requires_grad_(True) for k, v in w0.items()}
    logits, loss = forward(w, idx, targets, top_k, capacity)
    loss.backward()
    grads = {name: w[name].grad.clone() for name, _ in param_list()}
    grad_norm = torch.sqrt(sum((g * g).sum() for g in grads.values()))
    params = [w[name] for name, _ in param_list()]
    decay = [w[name] for name, shape in param_list() if len(shape) == 2]
    no_decay = [w[name] for name, shape in param_list() if len(shape) != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WD}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=LR, betas=(BETA1, BETA2), eps=EPS)
    for p in params:
        p.grad = None
    losses = []
    for _ in range(STEPS):
        opt.zero_grad(set_to_none=True)
        _, step_loss = forward(w, idx, targets, top_k, capacity)
        step_loss.backward()
        losses.append(step_loss.item())
        opt.step()
    return logits, loss, grad_norm, grads, losses


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
    names = "\n".join(name for name, _ in param_list()).encode()

    header = [0] * 64
    header[0:16] = [20251124, 1, B, T, V, VP, L, NH, C, MAXT, STEPS, E, EVERY, len(CASES), len(param_list()), 0]
    with open(os.path.join(args.out, "moe_small_reference.bin"), "wb") as f:
        f.write(struct.pack("<64i", *header))
        f.write(struct.pack("<8f", LR, BETA1, BETA2, EPS, WD, AUX, 0.0, 0.0))
        f.write(struct.pack("<i", len(names)))
        f.write(names)
        f.write(struct.pack(f"<{B * T}i", *idx.reshape(-1).tolist()))
        f.write(struct.pack(f"<{B * T}i", *targets.reshape(-1).tolist()))
        write_floats(f, flat(w))
        for top_k, capacity in CASES:
            logits, loss, grad_norm, grads, losses = run_case(w, idx, targets, top_k, capacity)
            f.write(struct.pack("<i3f", top_k, capacity, 0.0, 0.0))
            write_floats(f, logits)
            f.write(struct.pack("<2f", loss.item(), grad_norm.item()))
            write_floats(f, flat(grads))
            f.write(struct.pack(f"<{STEPS}f", *losses))
            print(f"top-{top_k} capacity {capacity}: loss {loss.item():.6f} grad_norm {grad_norm.item():.6f} "
                  f"after AdamW {' '.join(f'{x:.5f}' for x in losses)}")


if __name__ == "__main__":
    main()
