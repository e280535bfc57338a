#!/usr/bin/env python3
"""Runs PyTorch's fr_trace and NVIDIA nvidia-resiliency-ext's FR attribution on Flight Recorder dump folders.

Writes every tool's full output to --raw-out and prints, per folder and tool, the exact command, the
exit code and the verdict part of the output (fr_trace: its "Not all ranks joining" / mismatch
reports, or the exception that ended it; NVRx: the final "Missing Ranks" table, or the exception).
oracle-verdicts.md beside this script was written from that output.

  python scripts/fr-fixtures/run_oracles.py [--nvrx-src DIR] FOLDER...

--nvrx-src: the src/ folder of a nvidia-resiliency-ext checkout. The PyPI release (0.4.1) has no
attribution package; its FR attribution (nvidia_resiliency_ext/attribution/trace_analyzer/
fr_attribution.py) is only in the repository. It is run as
  python -m nvidia_resiliency_ext.attribution.trace_analyzer.fr_attribution --fr-path DIR -p PATTERN --emit-stdout
"""

import argparse
import json
import os
import pickle
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

NOISE = re.compile(r"Failed to initialize NumPy|pynvml|import pynvml|tabulate is not installed|^\s*$")


def pattern_of(folder):
    names = [n for n in os.listdir(folder) if re.search(r"\d+$", n)]
    prefixes = {re.sub(r"\d+$", "", n) for n in names}
    return sorted(prefixes)[0] if prefixes else "_dump_"


def run(cmd, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    clean = lambda text: [l for l in text.splitlines() if not NOISE.search(l)]
    return p.returncode, clean(p.stdout), clean(p.stderr)


def fr_trace_verdict(lines, max_reports=2):
    """The exception that ended fr_trace, or its first reports verbatim plus a count of the rest."""
    if any(l.startswith("Traceback") for l in lines):
        return [lines[-1]]
    keep, reports = [], 0
    cannot = {}
    for l in lines:
        m = re.match(r"We cannot decide what's wrong .* missed FR dumps from ranks \((.*?)\)", l)
        if m:
            if m.group(1) not in cannot:
                keep.append(l)
            cannot[m.group(1)] = cannot.get(m.group(1), 0) + 1
            continue
        if l.startswith("Not all ranks joining"):
            reports += 1
        if reports <= max_reports or l.startswith("Too many mismatches"):
            keep.append(l)
    missing = {}
    for l in lines:
        if l.startswith("missing ranks"):
            missing[l] = missing.get(l, 0) + 1
    summary = f"[{reports} 'Not all ranks joining' reports"
    if missing:
        summary += ": " + ", ".join(f"{k} x{v}" for k, v in missing.items())
    if cannot:
        summary += "; 'We cannot decide ... missed FR dumps from ranks' x" + ", ".join(
            f"{v} for {k}" for k, v in cannot.items())
    return keep + [summary + "]"]


def nvrx_verdict(stdout, stderr):
    if any(l.startswith("Traceback") for l in stderr):
        return [stderr[-1]]
    # --emit-stdout prints the final "Missing Ranks" table on stdout (the log goes to stderr)
    idx = [i for i, l in enumerate(stdout) if l.startswith("PGID") and "Missing Ranks" in l]
    if idx:
        return [l for l in stdout[idx[-1]:] if not l.startswith("args:")]
    # no table on stdout: show the log's analysis table (empty when no rank is missing anywhere)
    hdr = [i for i, l in enumerate(stderr) if "Missing Ranks" in l and "Process Group" in l]
    if hdr:
        return ["(no 'Missing Ranks' table on stdout; the log's analysis table:)"] + stderr[hdr[-1]:hdr[-1] + 20]
    return stderr[-15:]


def with_pg_config(folder, groups_json, tmp_root):
    """A copy of a Gloo dump folder whose pg_config names every group the rank belongs to, NCCL-style.

    Gloo writes pg_config {'': ...} (see the fixtures' README), which both tools need keyed by group
    name. The copy is for this experiment only; the fixtures are not changed.
    """
    groups = json.load(open(groups_json))
    out = os.path.join(tmp_root, os.path.basename(os.path.normpath(folder)) + "+pg_config")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    for n in os.listdir(folder):
        src = os.path.join(folder, n)
        if not re.search(r"\d+$", n):
            continue
        d = pickle.load(open(src, "rb"))
        rank = int(re.search(r"(\d+)$", n).group(1))
        d["pg_config"] = {
            name: {"name": name, "desc": g["desc"], "ranks": str(g["ranks"])}
            for name, g in groups.items()
            if rank in g["ranks"]
        }
        with open(os.path.join(out, n), "wb") as f:
            pickle.dump(d, f, protocol=2)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("folders", nargs="+")
    ap.add_argument("--nvrx-src", help="src/ of a nvidia-resiliency-ext checkout (for the attribution package)")
    ap.add_argument("--raw-out", default=os.path.join(tempfile.gettempdir(), "fr-oracles"))
    ap.add_argument("--pg-config-from", metavar="GROUPS_JSON",
                    help="run on copies whose pg_config is filled from this <layout>_groups.json")
    args = ap.parse_args()
    os.makedirs(args.raw_out, exist_ok=True)
    py = sys.executable
    folders = args.folders
    if args.pg_config_from:
        folders = [with_pg_config(f, args.pg_config_from, args.raw_out) for f in folders]
    for folder in folders:
        name = os.path.basename(os.path.normpath(folder))
        pat = pattern_of(folder)
        print(f"\n## {name}\n")
        runs = [
            ("fr_trace", [py, "-m", "torch.distributed.flight_recorder.fr_trace", folder]),
            ("fr_trace --allow-incomplete-ranks",
             [py, "-m", "torch.distributed.flight_recorder.fr_trace", "--allow-incomplete-ranks", folder]),
            ("fr_trace -j --allow-incomplete-ranks",
             [py, "-m", "torch.distributed.flight_recorder.fr_trace", "-j", "--allow-incomplete-ranks", folder]),
        ]
        if args.nvrx_src:
            runs.append((
                "nvrx fr_attribution",
                [py, "-m", "nvidia_resiliency_ext.attribution.trace_analyzer.fr_attribution",
                 "--fr-path", folder, "-p", pat + "*", "--emit-stdout"],
            ))
        for tool, cmd in runs:
            env = dict(os.environ, PYTHONWARNINGS="ignore")
            if tool.startswith("nvrx"):
                env["PYTHONPATH"] = args.nvrx_src
            rc, out, err = run(cmd, env)
            lines = out + err
            raw = os.path.join(args.raw_out, f"{name}.{tool.replace(' ', '_').replace('-', '')}.txt")
            with open(raw, "w") as f:
                f.write(f"$ {' '.join(cmd)}\nrc={rc}\n" + "\n".join(lines) + "\n")
            verdict = nvrx_verdict(out, err) if tool.startswith("nvrx") else fr_trace_verdict(lines)
            if tool.startswith("fr_trace -j") and rc == 0:
                verdict = [f"[{len(lines)} lines of entries printed]"] + lines[:3]
            shown = ("PYTHONPATH=<nvrx>/src " if tool.startswith("nvrx") else "") + "python " + shlex.join(cmd[1:])
            print(f"### {tool} (exit {rc})\n```\n$ {shown}\n" + "\n".join(verdict) + "\n```")


if __name__ == "__main__":
    main()
