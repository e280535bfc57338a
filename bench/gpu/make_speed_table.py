#!/usr/bin/env python3
# make_speed_table.py — one markdown table (trainer, ms/step, tokens/s, MFU, peak memory) from the
# logs of gpt2_gpu_bench, bench/gpu/torch_gpt2.py and llm.c's train_gpt2cu.
#
# Is: a parser of those three programs' printed lines, and the table. Lines it does not know are
# skipped, so whole step logs can be passed. Is not: a benchmark; it measures nothing.
#
#   python3 bench/gpu/make_speed_table.py bench-d12.log torch.log llmc.log
import re
import sys

# gpt2_gpu_bench: "  probe off:     73800 tokens/s   222.00 ms/step  MFU 6.00%"
# torch_gpt2.py:  "  torch compile:  456000 tokens/s    36.00 ms/step  MFU 37.00%  peak 16.10 GiB  loss 7.1"
ROW = re.compile(r"^\s+(?P<label>(?:probe|torch) \w+)\s*:\s+(?P<tps>[\d.]+) tokens/s\s+(?P<ms>[\d.]+) ms/step"
                 r"\s+MFU (?P<mfu>\S+)(?:\s+peak (?P<peak>[\d.]+) GiB)?")
HEADER = re.compile(r"^(?P<source>gpt2_gpu_bench|torch_gpt2): (?P<what>.*)$")
# gpt2_gpu_bench's memory line follows its rows: "  peak memory: 8.85 GiB allocated by the model ..."
OUR_MEMORY = re.compile(r"^\s+peak memory: (?P<peak>[\d.]+) GiB allocated")
# llm.c: "step   40/40 | loss 7.1 (+0.00z)| norm 1.2 (+0.00z)| lr 6.00e-04 | 50.60 ms | 26.3% bf16 MFU | 324000 tok/s"
LLMC = re.compile(r"^step\s+\d+/\d+ \|.*\|\s*(?P<ms>[\d.]+) ms \|\s*(?P<mfu>[\d.]+)% bf16 MFU \|\s*(?P<tps>[\d.]+) tok/s")


def parse(lines):
    """Rows as dicts: trainer, ms, tps, mfu, peak (GiB or None), in the order they were printed."""
    rows, source, pending, llmc_last = [], None, [], None
    for line in lines:
        line = line.rstrip("\n")
        m = HEADER.match(line)
        if m:
            source, pending = m.group("source"), []
            continue
        m = ROW.match(line)
        if m and source:
            name = "ours (gpt2_gpu_bench), " + m.group("label") if source == "gpt2_gpu_bench" else \
                "PyTorch " + m.group("label").split()[1]
            row = {"trainer": name, "ms": float(m.group("ms")), "tps": float(m.group("tps")),
                   "mfu": m.group("mfu"), "peak": float(m.group("peak")) if m.group("peak") else None}
            rows.append(row)
            pending.append(row)
            continue
        m = OUR_MEMORY.match(line)
        if m and source == "gpt2_gpu_bench":
            for row in pending:
                row["peak"] = float(m.group("peak"))
            pending = []
            continue
        m = LLMC.match(line)
        if m:
            llmc_last = {"trainer": "llm.c train_gpt2cu", "ms": float(m.group("ms")), "tps": float(m.group("tps")),
                         "mfu": m.group("mfu") + "%", "peak": None}
    if llmc_last:
        rows.append(llmc_last)  # its last step: past warm-up
    return rows


def table(rows):
    out = ["| trainer | ms/step | tokens/s | MFU | peak memory |", "|---|---|---|---|---|"]
    for r in rows:
        peak = f"{r['peak']:.2f} GiB" if r["peak"] is not None else ""
        out.append(f"| {r['trainer']} | {r['ms']:.1f} | {r['tps'] / 1e3:.1f}K | {r['mfu']} | {peak} |")
    return "\n".join(out)


def main(paths):
    lines = []
    for path in paths or ["-"]:
        with (sys.stdin if path == "-" else open(path, errors="replace")) as f:
            lines.extend(f.readlines())
    rows = parse(lines)
    if not rows:
        print("make_speed_table: no benchmark lines found", file=sys.stderr)
        return 1
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
