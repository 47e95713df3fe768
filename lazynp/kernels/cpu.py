"""Numba CPU code generation for fused groups, with in-memory and on-disk caches.

A fused group becomes one ``@njit(parallel=..., nogil=True, error_model="numpy")`` kernel:
one loop over the group's iteration space that loads each input once, evaluates every
member's scalar expression (:mod:`lazynp.kernels.exprs`), stores only the live outputs, and
optionally accumulates a trailing reduction.  Kernel source is written to the kernel cache
folder and imported, so Numba's ``cache=True`` keeps compiled code across processes (the
folder, its size bound and eviction: :mod:`lazynp.kernels.cache`).

A kernel seen for the first time is compiled on a low-priority background thread while the
group runs on NumPy, op by op.  When the op-by-op work run for it meanwhile has cost as much
as getting it ready (a compile, or a load from Numba's disk cache), the caller gets it ready
itself and uses it (:func:`ready_seconds`; the rule is explained above it).
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import queue
import re
import sys
import threading
import time

import numpy as np

from .._base import counters as _counters, native as _native
from . import cache as _cache, threading_layer as _threading_layer


#: ``LAZYNP_SYNC_COMPILE=1`` compiles kernels on first use in the caller (tests).
SYNC_COMPILE = os.environ.get("LAZYNP_SYNC_COMPILE", "0") == "1"



_threading_layer.wanted_layer()         # (a bad LAZYNP_THREADING_LAYER fails the import)
_threading_layer.choose_if_numba_loaded()
_parallel_lock = threading.Lock()


class _OneAtATime:
    """A compiled parallel kernel, launched by one thread at a time (the engine's threads
    may reach several at once; one parallel kernel already keeps every core busy)."""

    __slots__ = ("kernel",)

    def __init__(self, kernel):
        self.kernel = kernel

    def __call__(self, *args):
        with _parallel_lock:
            return self.kernel(*args)


STATS = {"kernel_compiles": 0, "kernel_cache_hits": 0, "kernel_compile_seconds": 0.0,
         "kernel_compile_failures": 0, "fused_groups_run": 0, "fused_groups_numpy": 0,
         "fused_groups_fp_rerun": 0, "forked_during_compile": 0,
         "kernel_foreground_compiles": 0, "kernel_load_seconds": 0.0,
         "kernel_fresh_compile_seconds": 0.0}

_REDUCE_INIT = {"sum": "0", "mean": "0", "prod": "1", "any": "False", "all": "True",
                "max": None, "min": None}
_REDUCE_STEP = {"sum": "acc = acc + {v}", "mean": "acc = acc + {v}", "prod": "acc = acc * {v}",
                "any": "acc = acc or ({v} != 0)", "all": "acc = acc and ({v} != 0)",
                "max": "acc = {v} if ({v} > acc or {v} != {v}) else acc",
                "min": "acc = {v} if ({v} < acc or {v} != {v}) else acc"}


# A vectorizable float64 exp (Cody-Waite reduction, degree-13 polynomial, 2**k from a
# table): Numba's exp is a scalar libm call, about 3x slower than NumPy's SIMD exp here.
# At most 1 ulp from NumPy's result (checked in tests/test_fusion.py).
_PRELUDE_EXP = """
with np.errstate(all="ignore"):     # (not warnings.catch_warnings: see _compile)
    _T2 = np.ldexp(1.0, np.arange(-1100, 1100))


@njit(inline="always", error_model="numpy")
def _fexp(x):
    xc = x if x == x else 0.0
    xc = min(max(xc, -746.0), 710.0)
    k = np.rint(xc * 1.4426950408889634)
    r = (xc - k * 6.93147180369123816490e-01) - k * 1.90821492927058770002e-10
    p = 1.6059043836821613e-10
    p = p * r + 2.08767569878681e-09
    p = p * r + 2.505210838544172e-08
    p = p * r + 2.755731922398589e-07
    p = p * r + 2.7557319223985893e-06
    p = p * r + 2.48015873015873e-05
    p = p * r + 0.0001984126984126984
    p = p * r + 0.001388888888888889
    p = p * r + 0.008333333333333333
    p = p * r + 0.041666666666666664
    p = p * r + 0.16666666666666666
    p = p * r + 0.5
    p = p * r + 1.0
    p = p * r + 1.0
    ki = np.int64(k)
    s = 2 if ki > 1020 else (-64 if ki < -1000 else 0)
    res = (p * _T2[ki - s + 1100]) * _T2[s + 1100]
    return res if x == x else x

"""


_CHUNK = 65536
#: a parallel loop over an array axis is split into at most this many chunks, each testing
#: its thread's floating-point flags once (a test per row of a (200000, 2) array cost 10x
#: the arithmetic)
_FLAG_CHUNKS = 64

_PRANGE_AXIS = re.compile(r"^(\s*)for (i\d+) in prange\((.+)\):$")
_PRANGE_ANY = re.compile(r"^(\s*)for (\w+) in prange\((.+)\):$")


def _with_fp_flags(body: list) -> list:
    """``body`` returning its floating-point exception flags (kernels/fpflags.py): tested
    once per chunk of the parallel loop (each thread has its own flags), or once."""
    par = next((i for i, line in enumerate(body) if "prange(" in line), None)
    if par is None:
        return ["    fp_clear()"] + body + ["    return fp_test()"]
    line = body[par]
    pad = " " * (len(line) - len(line.lstrip()) + 4)
    end = par + 1
    while end < len(body) and len(body[end]) - len(body[end].lstrip()) >= len(pad):
        end += 1
    inner = body[par + 1:end]
    # (each chunk's flags go to its own slot, OR-ed once the loop is done: a prange
    # reduction can only add, and a sum of bit sets is not their union -- two chunks that
    # each raised "invalid" would add up to a bit no test looks at)
    axis = _PRANGE_AXIS.match(line)
    if axis is not None:
        # ``for i0 in prange(n)`` -> chunks of consecutive indices (unsigned bounds: no
        # negative-index wraparound code in the loop, so it still vectorizes)
        lead, var, ext = axis.groups()
        head = [f"{lead}ext_ = {ext}",
                f"{lead}nch_ = min(ext_, {_FLAG_CHUNKS})",
                f"{lead}flg_ = np.zeros(nch_, np.int64)",
                f"{lead}for c_ in prange(nch_):",
                f"{pad}lo_ = np.uint64(c_ * ext_ // nch_)",
                f"{pad}hi_ = np.uint64((c_ + 1) * ext_ // nch_)",
                f"{pad}fp_clear()",
                f"{pad}for {var} in range(lo_, hi_):"]
        return (["    bad = 0"] + body[:par] + head + ["    " + b for b in inner] +
                [pad + "flg_[c_] = fp_test()"] + _or_flags(lead, "nch_") + body[end:] +
                ["    return bad"])
    loop = _PRANGE_ANY.match(line)
    lead, var, ext = loop.groups()
    head = [f"{lead}npar_ = {ext}",
            f"{lead}flg_ = np.zeros(npar_, np.int64)",
            f"{lead}for {var} in prange(npar_):"]
    return (["    bad = 0"] + body[:par] + head + [pad + "fp_clear()"] + inner +
            [pad + f"flg_[{var}] = fp_test()"] + _or_flags(lead, "npar_") + body[end:] +
            ["    return bad"])


def _or_flags(lead: str, n: str) -> list:
    return [f"{lead}for f_ in range({n}):", f"{lead}    bad |= flg_[f_]"]


class KernelSpec:
    """Everything that decides a kernel's code (its cache key is the generated source)."""

    def __init__(self, lines: list, n_in: int, n_out: int, ndim: int, flat: bool,
                 parallel: bool, reduction=None):
        self.lines = lines              # body statements computing t0..tk from inputs, kc_*
        self.n_in = n_in
        self.n_out = n_out
        self.ndim = ndim
        self.flat = flat
        self.parallel = parallel
        self.reduction = reduction      # None or (kind, red_axes tuple, acc dtype, value expr)
        self.out_exprs: list = []       # (out index, expression name)
        self.const_names: list = []     # packed constant arrays, one per dtype
        self.bcast: list = []           # nd layout: per input, which dims are broadcast (size 1)
        self.strided = False            # nd layout: inputs as flat buffers + table ``xs``
        self.loop_order = None          # nd elementwise: the loops' axes, outermost first
        self.red_src_out = None         # output index holding the reduced value, if stored
        self.reduction_src = 0          # member index of the reduced value
        self.partial_sums = False       # a sum over the last axis: four partial sums
        self.source = None

    def render(self) -> str:
        if self.source is not None:
            return self.source
        ins = [f"x{k}" for k in range(self.n_in)]
        consts = list(self.const_names)
        outs = [f"o{k}" for k in range(self.n_out)]
        params = ins + consts + outs + (["r0"] if self.reduction else [])
        if not self.flat and (self.bcast or self.strided):
            params.append("shp")
        if self.strided:
            params.append("xs")
        rng = "prange" if self.parallel else "range"
        src = ["import numpy as np", "from numba import njit, prange",
               "from lazynp.kernels.fpflags import fp_clear, fp_test", ""]
        if any("_fexp(" in line for line in self.lines):
            src.append(_PRELUDE_EXP)
        header = f"def kernel({', '.join(params)}):"
        nd = 1 if self.flat else self.ndim
        body = []
        if self.strided:
            # (offsets and strides as unsigned locals: loads at known addresses, no
            # negative-index wraparound test, so the inner loop vectorizes; named base<k>,
            # s<k>_<d>: a row reduction's partial sums are a0..a3)
            for k in range(self.n_in):
                body.append(f"    base{k} = xs[{k}, 0]")
                body += [f"    s{k}_{d} = xs[{k}, {d + 1}]" for d in range(nd)]
        if self.reduction is None and self.flat and self.parallel:
            # chunks of the flat range: each checks its thread's floating-point flags once
            body += ["    n = x0.shape[0]",
                     f"    for c in prange((n + {_CHUNK - 1}) // {_CHUNK}):",
                     f"        lo = np.uint64(c * {_CHUNK})",
                     f"        hi = np.uint64(min(c * {_CHUNK} + {_CHUNK}, n))",
                     "        for i0 in range(lo, hi):"]
            body += self._load_compute_store(" " * 12, "i0")
        elif self.reduction is None:
            idx = ", ".join(f"i{d}" for d in range(nd))
            indent = "    "
            for n, d in enumerate(self.loop_order or range(nd)):
                loop = rng if n == 0 else "range"
                body.append(f"{indent}for i{d} in {loop}({self._extent(d)}):")
                indent += "    "
            body += self._load_compute_store(indent, idx)
        else:
            kind, red_axes, acc_dt, vname = self.reduction
            kept = [d for d in range(nd) if d not in red_axes]
            order = kept + list(red_axes)
            idx = ", ".join(f"i{d}" for d in range(nd))
            indent = "    "
            if not kept and self.flat and kind in ("sum", "mean"):
                body += self._chunked_sum(vname, acc_dt, rng)
            elif not kept:  # full reduction: one accumulator (a prange reduction)
                body.append(f"{indent}acc = {self._init_expr(kind, acc_dt)}")
                for n, d in enumerate(order):
                    # (a flat product stays serial: its flag check would be per element)
                    loop = rng if n == 0 and kind in ("sum", "mean", "prod") and \
                        not self.flat else "range"
                    body.append(f"{indent}for i{d} in {loop}({self._extent(d)}):")
                    indent += "    "
                body += self._load_compute_store(indent, idx)
                body.append(f"{indent}{_REDUCE_STEP[kind].format(v=vname.format(src=self._src))}")
                body.append(f"    r0[0] = acc")
            elif tuple(red_axes) == tuple(range(len(red_axes))):
                body += self._leading_reduction(kind, red_axes, kept, acc_dt, vname, rng)
            else:
                for n, d in enumerate(kept):
                    loop = rng if n == 0 else "range"
                    body.append(f"{indent}for i{d} in {loop}({self._extent(d)}):")
                    indent += "    "
                ridx = ", ".join(f"i{d}" for d in kept)
                last = nd - 1
                if self.red_src_out is not None and tuple(red_axes) == (last,) and \
                        kind in ("sum", "mean"):
                    # two passes over the row: the elementwise loop vectorizes (no serial
                    # accumulator in it), then four independent partial sums
                    body.append(f"{indent}for i{last} in range({self._extent(last)}):")
                    body += self._load_compute_store(indent + "    ", idx)
                    init = self._init_expr(kind, acc_dt)
                    body.append(f"{indent}a0 = {init}; a1 = {init}; a2 = {init}; a3 = {init}")
                    body.append(f"{indent}n = {self._extent(last)}")
                    body.append(f"{indent}j = 0")
                    o = f"o{self.red_src_out}"
                    pre = (ridx + ", ") if ridx else ""
                    body.append(f"{indent}while j + 4 <= n:")
                    for q in range(4):
                        v = vname.format(src=f"{o}[{pre}j + {q}]")
                        body.append(f"{indent}    a{q} = a{q} + {v}")
                    body.append(f"{indent}    j += 4")
                    body.append(f"{indent}while j < n:")
                    body.append(f"{indent}    a0 = a0 + {vname.format(src=f'{o}[{pre}j]')}")
                    body.append(f"{indent}    j += 1")
                    body.append(f"{indent}r0[{ridx}] = (a0 + a1) + (a2 + a3)")
                elif self.partial_sums and tuple(red_axes) == (last,) and kind == "sum":
                    # four independent partial sums along the row, each step loading and
                    # computing its own element: no serial chain of additions
                    # (gesummv's two 2000x2000 matrix-vector products: 5.2 -> 3.3 ms)
                    init = self._init_expr(kind, acc_dt)
                    body.append(f"{indent}a0 = {init}; a1 = {init}; a2 = {init}; a3 = {init}")
                    body.append(f"{indent}n = {self._extent(last)}")
                    body.append(f"{indent}j = 0")
                    body.append(f"{indent}while j + 4 <= n:")
                    for q in range(4):
                        body.append(f"{indent}    i{last} = j + {q}")
                        body += self._load_compute_store(indent + "    ", idx)
                        body.append(f"{indent}    a{q} = a{q} + "
                                    f"{vname.format(src=self._src)}")
                    body.append(f"{indent}    j += 4")
                    body.append(f"{indent}while j < n:")
                    body.append(f"{indent}    i{last} = j")
                    body += self._load_compute_store(indent + "    ", idx)
                    body.append(f"{indent}    a0 = a0 + {vname.format(src=self._src)}")
                    body.append(f"{indent}    j += 1")
                    body.append(f"{indent}r0[{ridx}] = (a0 + a1) + (a2 + a3)")
                else:
                    body.append(f"{indent}acc = {self._init_expr(kind, acc_dt)}")
                    inner = indent
                    for d in red_axes:
                        body.append(f"{inner}for i{d} in range({self._extent(d)}):")
                        inner += "    "
                    body += self._load_compute_store(inner, idx)
                    body.append(f"{inner}{_REDUCE_STEP[kind].format(v=vname.format(src=self._src))}")
                    body.append(f"{indent}r0[{ridx}] = acc")
        # (a loop nest without a prange -- max/min over everything -- compiles serially:
        # parallel=True there only makes Numba warn)
        parallel = self.parallel and any("prange(" in line for line in body)
        src += [f"@njit(parallel={parallel}, nogil=True, cache=True, error_model='numpy')",
                header]
        self.source = "\n".join(src + _with_fp_flags(body)) + "\n"
        return self.source

    def _init_expr(self, kind: str, acc_dt: np.dtype) -> str:
        from .exprs import np_name
        if kind == "max":
            return "-np.inf" if acc_dt.kind == "f" else f"np.iinfo({np_name(acc_dt)}).min"
        if kind == "min":
            return "np.inf" if acc_dt.kind == "f" else f"np.iinfo({np_name(acc_dt)}).max"
        if kind in ("any", "all"):
            return _REDUCE_INIT[kind]
        return f"{np_name(acc_dt)}({_REDUCE_INIT[kind]})"

    def _leading_reduction(self, kind: str, red_axes, kept: list, acc_dt, vname: str,
                           rng: str) -> list:
        """A reduction over the leading axes (``sum(axis=0)`` of a C-ordered array) in memory
        order: the accumulators are a row of ``r0``, updated while walking the rows, so every
        load is contiguous.  Blocks of the first kept axis run in parallel."""
        nd = len(red_axes) + len(kept)
        idx = ", ".join(f"i{d}" for d in range(nd))
        ridx = ", ".join(f"i{d}" for d in kept)
        k0 = kept[0]
        b = [f"    nb = ({self._extent(k0)} + 63) // 64",
             f"    for blk in {rng}(nb):",
             # (unsigned bounds: ``r0[i]`` then has no negative-index test, and the inner
             # loop vectorizes: a (2000, 1000) ``sum(x * y, axis=0)``, the kernel alone, 6.0
             # -> 1.4 ms CPU time; NumPy 1.9 ms)
             "        lo = np.uint64(blk * 64)",
             f"        hi = np.uint64(min(blk * 64 + 64, {self._extent(k0)}))"]

        def kept_loops(indent: str) -> tuple:
            lines = []
            for d in kept:
                ext = "lo, hi" if d == k0 else self._extent(d)
                lines.append(f"{indent}for i{d} in range({ext}):")
                indent += "    "
            return lines, indent

        lines, inner = kept_loops("        ")
        b += lines + [f"{inner}r0[{ridx}] = {self._init_expr(kind, acc_dt)}"]
        indent = "        "
        for d in red_axes:
            b.append(f"{indent}for i{d} in range({self._extent(d)}):")
            indent += "    "
        lines, inner = kept_loops(indent)
        b += lines + self._load_compute_store(inner, idx)
        b += [f"{inner}acc = r0[{ridx}]",
              f"{inner}{_REDUCE_STEP[kind].format(v=vname.format(src=self._src))}",
              f"{inner}r0[{ridx}] = acc"]
        return b

    def _chunked_sum(self, vname: str, acc_dt, rng: str) -> list:
        """A full flat sum as chunks (parallel) of four independent partial sums each, so
        the loop is not one serial chain of additions; partials are added at the end."""
        init = self._init_expr("sum", acc_dt)
        from .exprs import np_name
        b = ["    n = x0.shape[0]",
             "    nchunk = (n + 65535) // 65536",
             f"    part = np.empty(nchunk, {np_name(acc_dt)})",
             f"    for c in {rng}(nchunk):",
             "        lo = c * 65536",
             "        hi = min(lo + 65536, n)",
             f"        a0 = {init}; a1 = {init}; a2 = {init}; a3 = {init}",
             "        i0 = lo",
             "        while i0 + 4 <= hi:"]
        for q in range(4):
            b += self._load_compute_store(" " * 12, f"i0 + {q}")
            b.append(f"            a{q} = a{q} + {vname.format(src=self._src)}")
        b += ["            i0 += 4",
              "        while i0 < hi:"]
        b += self._load_compute_store(" " * 12, "i0")
        b += [f"            a0 = a0 + {vname.format(src=self._src)}",
              "            i0 += 1",
              "        part[c] = (a0 + a1) + (a2 + a3)",
              f"    acc = {init}",
              "    for c in range(nchunk):",
              "        acc = acc + part[c]",
              "    r0[0] = acc"]
        return b

    @property
    def _src(self) -> str:
        return f"t{self.reduction_src}"

    def _extent(self, d: int) -> str:
        if self.flat:
            return "x0.shape[0]"
        if self.bcast or self.strided:
            return f"shp[{d}]"
        return f"{'o0' if self.n_out else 'x0'}.shape[{d}]"

    def _load_compute_store(self, indent: str, idx: str) -> list:
        out = []
        for k in range(self.n_in):
            if self.strided:
                ivars = [i.strip() for i in idx.split(",")]
                terms = " + ".join(f"np.uint64({i}) * s{k}_{d}" for d, i in enumerate(ivars))
                out.append(f"{indent}v{k} = x{k}[base{k} + {terms}]")
            elif self.flat or not self.bcast:
                out.append(f"{indent}v{k} = x{k}[{idx}]")
            else:
                ix = ", ".join("0" if b else f"i{d}" for d, b in enumerate(self.bcast[k]))
                out.append(f"{indent}v{k} = x{k}[{ix}]")
        out += [indent + line for line in self.lines]
        out += [f"{indent}o{k}[{idx}] = {name}" for k, name in self.out_exprs]
        return out


_kernels: dict = {}          # source -> dispatcher (or None while compiling / failed)
_ready: dict = {}            # (source, signature) -> True once compiled
_failed: set = set()
_lock = threading.Lock()
_queue: "queue.Queue" = queue.Queue()
_worker = None


def _load_module(source: str):
    digest = hashlib.sha1(source.encode()).hexdigest()[:20]
    name = _cache.PREFIX + digest
    try:
        path = _cache.write_source(name, source)
        _cache.mark_used(name, path)
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod     # Numba's cache re-imports the module by name
        spec.loader.exec_module(mod)
    except OSError:  # read-only home: compile in memory, no disk cache
        mod = type(sys)(name)
        sys.modules[name] = mod
        exec(compile(source.replace("cache=True", "cache=False"), name, "exec"), mod.__dict__)
    return mod.kernel


def _source_on_disk(disp) -> None:
    """Write a loaded kernel's source again if the cache was cleared (or this folder's
    kernel evicted by another process) since: Numba reads it to save new signatures."""
    path = getattr(getattr(disp, "py_func", None), "__code__", None)
    path = getattr(path, "co_filename", "")
    if path.endswith(".py") and not os.path.exists(path):
        try:
            name = os.path.basename(path)[:-3]
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(_source_of[name])
        except (OSError, KeyError):
            pass


_source_of: dict = {}        # kernel module name -> its source (for _source_on_disk)


#: threads compiling a kernel now (:func:`_compile`); Numba's warning capture skips them
_compiling = threading.local()


def _capture_warnings_off_main_thread() -> None:
    """Numba's type inference captures the warnings of each typing step with
    ``warnings.catch_warnings(record=True)`` (``numba.core.errors.WarningsFixer``), which
    swaps the process's warning filters and ``showwarning`` for the step.  Before Python
    3.14 that state is shared by all threads: a compile on lazynp's background thread
    would undo a ``catch_warnings``, ``pytest.warns`` or ``simplefilter("error")`` the user
    entered meanwhile, or take the user's NumPy warning into Numba's list and issue it
    later from the compile thread.  So while a thread other than the main one compiles a
    lazynp kernel, the capture is skipped (Numba's own warnings, none expected from
    generated kernels, then go out directly instead of deduplicated)."""
    from numba.core import errors
    if getattr(errors.WarningsFixer.catch_warnings, "_lazynp", False):
        return
    capture = errors.WarningsFixer.catch_warnings

    @contextlib.contextmanager
    def catch_warnings(self, filename=None, lineno=None):
        if getattr(_compiling, "active", False) and \
                threading.current_thread() is not threading.main_thread():
            yield
            return
        with capture(self, filename, lineno):
            yield
    catch_warnings._lazynp = True
    errors.WarningsFixer.catch_warnings = catch_warnings


def _compile(source: str, sig) -> None:
    t0 = time.perf_counter()
    _capture_warnings_off_main_thread()
    _compiling.active = True
    try:
        disp = _kernels.get(source)
        if disp is None:
            disp = _load_module(source)
            _kernels[source] = disp
            _source_of[disp.py_func.__module__] = source
        else:
            _source_on_disk(disp)
        before = _cache_hit_count(disp)
        t1 = time.thread_time()    # (CPU time: a starved compile thread's waits left out)
        disp.compile(sig)
        took = time.thread_time() - t1
        hits = _cache_hit_count(disp)
        if hits > before:
            STATS["kernel_cache_hits"] += 1
            STATS["kernel_load_seconds"] += took
        else:
            STATS["kernel_compiles"] += 1
            STATS["kernel_fresh_compile_seconds"] += took
            try:
                _cache.evict()      # (a new kernel's files were written)
            except OSError:
                pass
        _ready[(source, sig)] = _OneAtATime(disp) if "parallel=True" in source else disp
    except Exception:
        _failed.add((source, sig))
        STATS["kernel_compile_failures"] += 1
    finally:
        _compiling.active = False
        STATS["kernel_compile_seconds"] += time.perf_counter() - t0


def _cache_hit_count(disp) -> int:
    try:
        return sum(disp.stats.cache_hits.values())
    except Exception:
        return 0


def _work_loop() -> None:
    try:  # compile at low priority: the user's work comes first (Linux: per-thread nice)
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
    except (AttributeError, OSError):
        pass
    while True:
        source, sig = _queue.get()
        if not _stopped and (source, sig) not in _ready and (source, sig) not in _failed:
            if before_compile is not None:
                try:
                    before_compile()
                except Exception:
                    pass
            with _compile_lock:
                if (source, sig) not in _ready:
                    _compile(source, sig)
        _queue.task_done()


_pending: set = set()

#: Called by the compile thread before each compile (:func:`set_before_compile`).
before_compile = None


def set_before_compile(fn) -> None:
    """Have the compile thread call ``fn()`` before each compile: the graph layer waits
    there until the work already pushed has run, so a first call does not compete with its
    own compile."""
    global before_compile
    before_compile = fn


_signatures: dict = {}       # cheap type keys of the arguments -> Numba signature
_ready_by_tkey: dict = {}    # (source, cheap type key) -> compiled dispatcher


def _type_key(a):
    """What Numba's type of ``a`` depends on, without Numba's (slow) ``typeof``."""
    t = type(a)
    if t is np.ndarray:
        f = a.flags
        return (a.dtype, a.ndim, f.c_contiguous, f.f_contiguous, f.writeable, f.aligned)
    if t is tuple:
        return (tuple, tuple(_type_key(x) for x in a))
    if t is int or t is float or t is bool:
        return t
    return (t, a)      # anything else: by value (never wrong, not used by the generators)


def _type_keys_py(args) -> tuple:
    return tuple(_type_key(a) for a in args)


#: :func:`_type_key` of each argument (the C helper when built)
_type_keys = _native.ext.type_key if _native.ext is not None else _type_keys_py


def get_kernel(source: str, args, block: bool = False):
    """The compiled kernel for ``source`` and these argument types, or None when it is not
    ready yet (a background compile is queued) or cannot be compiled.  ``block``: compile it
    in the caller now; else the caller does so once its group's op-by-op runs while it was
    pending cost as much as that (:func:`_worth_waiting`)."""
    tkey = _type_keys(args)
    disp = _ready_by_tkey.get((source, tkey))
    if disp is not None:
        return disp
    sig = _signatures.get(tkey)
    if sig is None:
        # Numba is first imported here (import lazynp does not), under _lock so that a fork
        # (fork_prepare takes _lock) never copies a half-done import; the threading layer is
        # chosen before Numba's first use by lazynp
        with _lock:
            _threading_layer.ensure_chosen()
            from numba import typeof
        sig = _signatures[tkey] = tuple(typeof(a) for a in args)
    key = (source, sig)
    disp = _ready.get(key)
    if disp is not None:
        # (hashing Numba types is slow: the next lookup uses the cheap key alone)
        _ready_by_tkey[(source, tkey)] = disp
        return disp
    if key in _failed or not compiles_available:
        return None
    if block or SYNC_COMPILE or on_disk(source) or _worth_waiting(key, source, args):
        with _compile_lock:
            if key not in _ready and key not in _failed:
                STATS["kernel_foreground_compiles"] += 0 if block or SYNC_COMPILE else 1
                _compile(source, sig)
        return _ready.get(key)
    _declined.key = key         # (the caller's op-by-op run is charged to it: charge_op_by_op)
    global _worker
    with _lock:
        if key not in _pending:
            _pending.add(key)
            _queue.put(key)
            if _worker is None:
                _worker = threading.Thread(target=_work_loop, name="lazynp-compile", daemon=True)
                _worker.start()
    return None


# --- when a pending kernel is worth waiting for -------------------------------------------
# While a kernel compiles on the low-priority thread, its group runs op by op on NumPy.  On a
# loaded machine (or at medium sizes on two cores) that thread can starve, and a loop then
# runs op by op for good.  The rule is the ski-rental one: keep running op by op while the
# op-by-op work done for this kernel costs less than getting the kernel ready, then get it
# ready in the caller (at the caller's priority) and use it.  That costs at most twice the
# better choice made knowing the future (how many more calls come).  Getting a kernel ready
# costs what a compile took in this process (a guess before the first).  A kernel Numba
# keeps on disk is loaded in the caller at once, compiling nothing: a load in the background
# saved little, as the loading thread holds the GIL for most of it (NPBench's heat-3d at S,
# a fresh process, its tree kernel on disk: the calls while it loaded in the background took
# 17-170 ms against NumPy's 4.8 ms, then 3.7-4.5 ms).  The process's first load also
# imports Numba and sets up its target (about 0.3 s, once); a later one took 2-3 ms.

# The op-by-op work is what the caller measured it to cost (:func:`charge_op_by_op`: the
# executor times a fused group's op-by-op run, in the thread's CPU time as compiles are), or,
# for a caller that does not measure it (a tree kernel's), an estimate from the arguments'
# bytes that undercounts it: the larger of the two counts.

#: NumPy's op-by-op time per byte of a group's arrays, a lower bound (each array read or
#: written at least once, at about 10 GB/s): the op-by-op estimate undercounts the work,
#: so a kernel is waited for late rather than early.
OP_BY_OP_SECONDS_PER_BYTE = 1e-10
#: Seconds assumed for a compile and for a disk-cache load before one was measured.
COMPILE_SECONDS_GUESS = 0.5
LOAD_SECONDS_GUESS = 0.1

_op_by_op_seconds: dict = {}     # key -> estimated op-by-op seconds run while it was pending
_op_by_op_measured: dict = {}    # key -> measured op-by-op seconds run while it was pending
_declined = threading.local()    # .key: the kernel this thread's last get_kernel found pending
_compile_lock = threading.Lock()


def forget_declined() -> None:
    """Before a caller asks for a kernel whose op-by-op run it will charge: no earlier
    answer of this thread is charged by mistake."""
    _declined.key = None


def charge_op_by_op(seconds: float) -> None:
    """The caller ran op by op, taking ``seconds``, the work of the kernel that this thread's
    last :func:`get_kernel` call found pending (nothing when it found none since
    :func:`forget_declined`): the next requests weigh it against getting the kernel ready."""
    key = getattr(_declined, "key", None)
    if key is not None:
        _declined.key = None
        _op_by_op_measured[key] = _op_by_op_measured.get(key, 0.0) + seconds


def _args_bytes(args) -> int:
    n = 0
    for a in args:
        if type(a) is np.ndarray:
            n += a.nbytes
    return n


def on_disk(source: str) -> bool:
    """Whether Numba's on-disk cache holds compiled code for kernel ``source`` (its index
    file: getting it ready is a load, not a compile, when its signature is in it)."""
    name = _cache.PREFIX + hashlib.sha1(source.encode()).hexdigest()[:20]
    try:
        return name in _indexed_kernels(os.path.join(_cache.directory(), "__pycache__"))
    except OSError:
        return False


_indexed: dict = {}              # folder -> (its mtime, the kernel names with an index file)


def _indexed_kernels(folder: str) -> frozenset:
    """The kernel names with a Numba index file (``<name>.kernel-<line>.pyXY.nbi``) in
    ``folder``, listed again only when the folder changed."""
    mtime = os.stat(folder).st_mtime_ns
    hit = _indexed.get(folder)
    if hit is None or hit[0] != mtime:
        names = frozenset(f.split(".", 1)[0] for f in os.listdir(folder) if f.endswith(".nbi"))
        hit = _indexed[folder] = (mtime, names)
    return hit[1]


def ready_seconds(source: str) -> float:
    """The expected seconds to get kernel ``source`` ready in the caller: a disk-cache load
    when Numba keeps it on disk, else a compile (this process's averages once measured)."""
    if on_disk(source):
        n = STATS["kernel_cache_hits"]
        return STATS["kernel_load_seconds"] / n if n else LOAD_SECONDS_GUESS
    n = STATS["kernel_compiles"]
    return STATS["kernel_fresh_compile_seconds"] / n if n else COMPILE_SECONDS_GUESS


def _worth_waiting(key, source: str, args) -> bool:
    """Account one more op-by-op run of ``key``'s group (while its kernel is pending) and say
    whether the op-by-op work so far has cost as much as getting the kernel ready."""
    spent = _op_by_op_seconds.get(key, 0.0) + _args_bytes(args) * OP_BY_OP_SECONDS_PER_BYTE
    _op_by_op_seconds[key] = spent
    return max(spent, _op_by_op_measured.get(key, 0.0)) >= ready_seconds(source)


def wait_compiles() -> None:
    """Block until every queued kernel compile finished (tests, benchmarks)."""
    _queue.join()


_stopped = False


def stop_compiles() -> None:
    """At interpreter exit: no queued compile starts any more; the one in flight finishes
    (the kernels it would make are not needed)."""
    global _stopped
    _stopped = True
    _queue.join()


#: how long a fork waits for a kernel compile in flight (seconds) before going ahead without
#: it: the child then has no compiler (:func:`fork_prepare`)
FORK_COMPILE_GRACE = 0.05
#: False in a forked child whose parent was compiling at the fork: Numba's compiler lock
#: (and LLVM's own locks) stay held there, so the child never compiles; fused groups whose
#: kernel is not compiled yet run on NumPy
compiles_available = True
_compiler_held = None       # Numba's compiler lock while a fork holds it


def _numba_compiler_lock():
    """Numba's process-wide compiler lock (an ``RLock``), or None when Numba's compiler was
    never loaded (then nothing can be compiling)."""
    mod = sys.modules.get("numba.core.compiler_lock")
    return getattr(getattr(mod, "global_compiler_lock", None), "_lock", None)


def fork_prepare() -> bool:
    """Before ``os.fork()``: hold the compile queue and the parallel-kernel lock still, and
    Numba's compiler lock when no compile is running (waiting at most
    :data:`FORK_COMPILE_GRACE`): queued compiles are not waited for.  A child forked while a
    compile ran cannot compile (:data:`compiles_available`)."""
    global _compiler_held
    lock = _numba_compiler_lock()
    if lock is not None and lock.acquire(timeout=FORK_COMPILE_GRACE):
        _compiler_held = lock
    elif lock is None:
        _compiler_held = False
    _lock.acquire()
    _parallel_lock.acquire()
    return True


def fork_done(child: bool) -> None:
    """After ``os.fork()``: undo :func:`fork_prepare`.  In the child the parent's compile
    thread does not exist: a fresh queue (the old one's lock may have been held by that
    thread) and thread, and the compiles queued in the parent are queued again on demand."""
    global _worker, _queue, _compiler_held, compiles_available, _compile_lock
    if child:
        _worker = None
        _queue = queue.Queue()
        _compile_lock = threading.Lock()    # (the parent's compile thread may hold it)
        _pending.clear()
        if _compiler_held is None:
            compiles_available = False
            STATS["forked_during_compile"] += 1
    _parallel_lock.release()
    _lock.release()
    if _compiler_held:
        _compiler_held.release()
    _compiler_held = None


_counters.register_table(STATS)


def __getattr__(name: str):
    if name == "CACHE_DIR":     # (the folder is settable now: lazynp.kernels.cache)
        return _cache.directory()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
