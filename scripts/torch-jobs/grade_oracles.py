#!/usr/bin/env python3
"""PyTorch's fr_trace and NVIDIA's FR attribution on every run of the real-job corpus, graded.

For each tests/fixtures/torch-jobs/<run>/ with dumps/, runs
  fr_trace DUMPS                              (torch.distributed.flight_recorder.fr_trace)
  fr_trace --allow-incomplete-ranks DUMPS
  NVRx fr_attribution --fr-path DUMPS -p 'comm_lib_trace_rank_*' --emit-stdout   (with --nvrx-src)
and grades each answer against the run's truth.json the way hang_torch_jobs_test.cpp grades
hangdoctor's: abort (a Python exception ended it), false alarm (a report on a healthy run), right
(no report on a healthy run; a faulty run's culprit named, alone), ambiguous (named among others),
wrong (a report that does not name it, or no report on a faulty run). A run without dumps has
nothing for these tools: "no input". Prints a markdown table per run and the totals.

Both tools abort on every Gloo dump as torch 2.15 writes it: its pg_config is one entry keyed '' (with
ranks [0, 1, 2, 3] whatever the job), while entries name groups '0', '1', ... With --fill-pg-config
they run instead on copies whose pg_config names every group a rank's entries mention, its members
being the ranks whose entries mention it (the default group also the ranks of
Gloo's own entry, which counts the ranks that left no dump): NCCL's shape, as a generous reading of
what the job could have written. The fixtures are not changed.

  python scripts/torch-jobs/grade_oracles.py [--nvrx-src <nvidia-resiliency-ext>/src] [--fill-pg-config]
                                             [RUN_DIR...]

PYTHON must be a venv's python with torch 2.15 (which carries fr_trace). NVRx's attribution is only
in its repository's src/ (the PyPI release has no attribution package); run it from there.
"""
import argparse
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "..", "tests", "fixtures", "torch-jobs")


def run(cmd, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    return p.returncode, p.stdout + p.stderr


def with_filled_pg_config(dumps, scratch):
    """A copy of DUMPS whose pg_config lists each group the dumps mention, members from the dumps."""
    loaded = {}
    for n in os.listdir(dumps):
        m = re.search(r"(\d+)$", n)
        if m:
            with open(os.path.join(dumps, n), "rb") as f:
                loaded[n] = (int(m.group(1)), pickle.load(f))
    members = {}
    for rank, d in loaded.values():
        names = {e["process_group"][0] for e in d.get("entries", [])}  # pg_status's keys are local indices
        for g in names:
            members.setdefault(g, set()).add(rank)
    # The default group ('0') also holds the ranks that left no dump: Gloo's own pg_config entry lists
    # range(size) of the last group made, the world in a job without subgroups.
    world = max((len(json.loads(c["ranks"])) for _, d in loaded.values() for c in d.get("pg_config", {}).values()),
                default=0)
    members.setdefault("0", set()).update(range(world))
    out = os.path.join(scratch, os.path.basename(os.path.dirname(os.path.normpath(dumps))))
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    for n, (rank, d) in loaded.items():
        d["pg_config"] = {g: {"name": g, "desc": "", "ranks": str(sorted(ms))} for g, ms in members.items() if rank in ms}
        with open(os.path.join(out, n), "wb") as f:
            pickle.dump(d, f, protocol=2)
    return out


def named_ranks(text):
    """The ranks an answer blames: fr_trace's "missing ranks: {1}" and "missed FR dumps from ranks ({1})" (it
    says it cannot decide, but the rank it names is the one the truth names);
    the last column ("Missing Ranks") of each row of NVRx's final table (the lines after its header
    that carry no log prefix)."""
    ranks = set()
    for m in re.finditer(r"missing ranks: \{([\d, ]+)\}|missed FR dumps from ranks \(\{?([\d, ]+)\}?\)", text):
        ranks.update(int(x) for x in re.findall(r"\d+", m.group(1) or m.group(2)))
    lines = text.splitlines()
    headers = [i for i, l in enumerate(lines) if l.startswith("PGID") and "Missing Ranks" in l]
    if headers:
        for l in lines[headers[-1] + 1:]:
            if "|" not in l or l.startswith(("INFO", "args:")):
                break
            ranks.update(int(x) for x in re.findall(r"\d+", l.split("|")[-1]))
    return ranks


def grade(rc, text, truth):
    if "Traceback (most recent call last)" in text:
        last = [l for l in text.splitlines() if l.strip()][-1]
        return "abort", last.strip()[:90]
    named = named_ranks(text)
    if truth["verdict"] == "healthy":
        return ("false alarm", f"names {sorted(named)}") if named else ("right", "no report")
    culprits = set(truth["culprits"])
    if named == culprits:
        return "right", f"names {sorted(named)}"
    if culprits <= named:
        return "ambiguous", f"names {sorted(named)}"
    return "wrong", f"names {sorted(named)}" if named else "no culprit named"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="*")
    ap.add_argument("--nvrx-src")
    ap.add_argument("--fill-pg-config", action="store_true")
    args = ap.parse_args()
    scratch = tempfile.mkdtemp(prefix="fr-oracles-")
    runs = args.runs or sorted(os.path.join(CORPUS, d) for d in os.listdir(CORPUS)
                               if os.path.exists(os.path.join(CORPUS, d, "truth.json")))
    py = sys.executable
    tools = [("fr_trace", lambda d: [py, "-m", "torch.distributed.flight_recorder.fr_trace", d], None),
             ("fr_trace --allow-incomplete-ranks",
              lambda d: [py, "-m", "torch.distributed.flight_recorder.fr_trace", "--allow-incomplete-ranks", d], None)]
    if args.nvrx_src:
        tools.append(("NVRx fr_attribution",
                      lambda d: [py, "-m", "nvidia_resiliency_ext.attribution.trace_analyzer.fr_attribution",
                                 "--fr-path", d, "-p", "comm_lib_trace_rank_*", "--emit-stdout"],
                      dict(os.environ, PYTHONPATH=args.nvrx_src)))
    totals = {t[0]: {} for t in tools}
    print("| run | truth | " + " | ".join(t[0] for t in tools) + " |")
    print("|---|---|" + "---|" * len(tools))
    for r in runs:
        truth = json.load(open(os.path.join(r, "truth.json")))
        dumps = os.path.join(r, "dumps")
        cells = []
        for name, cmd, env in tools:
            if not os.path.isdir(dumps):
                g, why = "no input", "no dumps"
            else:
                folder = with_filled_pg_config(dumps, scratch) if args.fill_pg_config else dumps
                g, why = grade(*run(cmd(folder), env), truth)
            totals[name][g] = totals[name].get(g, 0) + 1
            cells.append(f"{g}: {why}")
        t = "healthy" if truth["verdict"] == "healthy" else "rank " + ",".join(map(str, truth["culprits"]))
        print(f"| {os.path.basename(os.path.normpath(r))} | {t} | " + " | ".join(cells) + " |")
    print()
    for name, counts in totals.items():
        print(f"{name}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
