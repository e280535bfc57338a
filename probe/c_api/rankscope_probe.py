"""rankscope_probe.py — the rankscope probe in a Python trainer, through librankscope-probe.so.

Is: a thin ctypes wrapper over rankscope_probe_c.h (standard library only): open the probe, mark
steps, open ranges (nested names become paths: "forward" > "block0" > "attn" is
"forward/block0/attn", the names gpt2-train's ranges have), time the collectives the program makes,
counters, run.json. Is not: an automatic instrumentation of PyTorch; you say what a step and a range
are, as with NVTX.

    import rankscope_probe
    probe = rankscope_probe.Probe("runs/today")          # rank from RANK/WORLD_SIZE (torchrun)
    probe.write_run_json({"program": "my-trainer", "training": {"seq_len": 1024}})
    world = probe.register_comm("world", world_size, rank)
    for step in range(steps):
        with probe.step(step):
            with probe.range("forward"):
                loss = model(batch)
            with probe.collective(world, "allreduce_sum", "fp32", count=n, nbytes=4 * n):
                dist.all_reduce(flat)
    probe.close()

The library is found at $RANKSCOPE_PROBE_LIB, else beside this file, else as librankscope-probe.so
on the loader's path.
"""

import contextlib
import ctypes
import json
import os
import threading

ABI_VERSION = 1


class ProbeError(RuntimeError):
    pass


def _load(path=None):
    candidates = [path, os.environ.get("RANKSCOPE_PROBE_LIB"),
                  os.path.join(os.path.dirname(os.path.abspath(__file__)), "librankscope-probe.so"),
                  "librankscope-probe.so"]
    errors = []
    for c in candidates:
        if not c:
            continue
        try:
            lib = ctypes.CDLL(c)
            break
        except OSError as e:
            errors.append(str(e))
    else:
        raise ProbeError("librankscope-probe.so not found (set RANKSCOPE_PROBE_LIB): " + "; ".join(errors))
    p, c_char_p, c_int, c_int64, c_size_t = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int64, ctypes.c_size_t
    sigs = {
        "rankscope_probe_abi_version": (c_int, []),
        "rankscope_probe_open": (p, [c_char_p, c_int, c_int, c_char_p, c_size_t]),
        "rankscope_probe_close": (None, [p]),
        "rankscope_probe_mark_aborted": (None, [p]),
        "rankscope_probe_rank": (c_int, [p]),
        "rankscope_probe_world_size": (c_int, [p]),
        "rankscope_probe_write_run_json": (c_int, [p, c_char_p, c_char_p, c_size_t]),
        "rankscope_probe_begin_step": (None, [p, c_int64]),
        "rankscope_probe_end_step": (None, [p]),
        "rankscope_probe_push_range": (None, [p, c_char_p]),
        "rankscope_probe_pop_range": (None, [p]),
        "rankscope_probe_register_comm": (c_int, [p, c_char_p, c_int, c_int, c_char_p, c_size_t]),
        "rankscope_probe_collective_begin": (c_int64, [p, c_int, c_char_p, c_char_p, ctypes.c_uint64, ctypes.c_uint64,
                                                       c_char_p, c_size_t]),
        "rankscope_probe_collective_end": (None, [p, c_int64, c_int]),
        "rankscope_probe_counter": (None, [p, c_char_p, ctypes.c_double]),
        "rankscope_probe_counter_add": (None, [p, c_char_p, ctypes.c_double]),
    }
    for name, (res, args) in sigs.items():
        f = getattr(lib, name)
        f.restype = res
        f.argtypes = args
    if lib.rankscope_probe_abi_version() != ABI_VERSION:
        raise ProbeError("librankscope-probe.so speaks ABI %d, this wrapper %d" % (lib.rankscope_probe_abi_version(), ABI_VERSION))
    return lib


def _b(text):
    return None if text is None else text.encode()


class Probe:
    """One rank's probe. rank/world_size None: from the launcher's environment."""

    def __init__(self, run_dir=None, rank=None, world_size=None, library=None):
        self._lib = _load(library)
        err = ctypes.create_string_buffer(512)
        self._p = self._lib.rankscope_probe_open(_b(run_dir), -1 if rank is None else rank,
                                                 0 if world_size is None else world_size, err, len(err))
        if not self._p:
            raise ProbeError(err.value.decode(errors="replace"))
        self._names = threading.local()

    @property
    def rank(self):
        return self._lib.rankscope_probe_rank(self._p)

    @property
    def world_size(self):
        return self._lib.rankscope_probe_world_size(self._p)

    def _check(self, rc, err):
        if rc < 0:
            raise ProbeError(err.value.decode(errors="replace"))
        return rc

    def write_run_json(self, fields):
        err = ctypes.create_string_buffer(512)
        self._check(self._lib.rankscope_probe_write_run_json(self._p, _b(json.dumps(fields)), err, len(err)), err)

    @contextlib.contextmanager
    def step(self, number):
        self._lib.rankscope_probe_begin_step(self._p, number)
        try:
            yield
        finally:
            self._lib.rankscope_probe_end_step(self._p)

    @contextlib.contextmanager
    def range(self, name):
        """A range named by its path below the ranges this thread has open."""
        stack = getattr(self._names, "stack", None)
        if stack is None:
            stack = self._names.stack = []
        stack.append(name)
        self._lib.rankscope_probe_push_range(self._p, _b("/".join(stack)))
        try:
            yield
        finally:
            self._lib.rankscope_probe_pop_range(self._p)
            stack.pop()

    def register_comm(self, name, size, rank_in_comm):
        err = ctypes.create_string_buffer(512)
        return self._check(self._lib.rankscope_probe_register_comm(self._p, _b(name), size, rank_in_comm, err, len(err)), err)

    @contextlib.contextmanager
    def collective(self, comm, op, dtype=None, count=0, nbytes=0):
        err = ctypes.create_string_buffer(512)
        token = self._check(self._lib.rankscope_probe_collective_begin(self._p, comm, _b(op), _b(dtype), count, nbytes,
                                                                       err, len(err)), err)
        failed = 1
        try:
            yield
            failed = 0
        finally:
            self._lib.rankscope_probe_collective_end(self._p, token, failed)

    def counter(self, name, value):
        self._lib.rankscope_probe_counter(self._p, _b(name), float(value))

    def counter_add(self, name, delta):
        self._lib.rankscope_probe_counter_add(self._p, _b(name), float(delta))

    def mark_aborted(self):
        self._lib.rankscope_probe_mark_aborted(self._p)

    def close(self):
        if self._p:
            self._lib.rankscope_probe_close(self._p)
            self._p = None

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        if kind is not None:
            self.mark_aborted()
        self.close()
