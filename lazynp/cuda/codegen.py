"""Numba CUDA code generation for fused groups (the CUDA twin of :mod:`lazynp.kernels.cpu`).

The member statements ``t<k> = <expression>`` come from the same layout and scalar
templates as the CPU kernels (:class:`lazynp.kernels.fused.Layout`, which expands the op
table's templates with :mod:`lazynp.kernels.exprs`); only the loop around them differs:

* elementwise: a grid-stride loop over the flat index (inputs of the group's shape and
  C-contiguous are read as 1-D; otherwise the index is unravelled and every input is read
  through its own strides, broadcast dimensions at index 0);
* a trailing reduction: a block reduction.  Each block reduces a slice of one output
  element's reduced elements into shared memory (tree), writing one partial; a second
  small kernel combines the partials of each output element (and divides for ``mean``).
  A reduction that keeps the last axis (over outer axes: ``x.sum(axis=0)``) is instead one
  thread per kept element and slice, consecutive threads on consecutive elements, so that
  each warp reads contiguous memory (:func:`outer_reduction_source`).

Kernels are compiled once per source and argument types and kept in memory and on disk:
each source is written to the CPU kernels' cache folder (:mod:`lazynp.kernels.cache`, its
size bound and least-recently-used eviction) as ``lazynp_k_cuda_<digest>.py`` and imported
from there with ``cuda.jit(cache=True)``, so numba-cuda keeps the compiled code beside it,
keyed by the source (the digest also covers :mod:`lazynp.cuda.devmath`, whose lowerings the
kernels inline), the argument types, the compute capability and numba-cuda's version (its
cache index); a second process loads it instead of compiling (:func:`compile_source`).
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import sys
import threading
import warnings

import numpy as np

from .._base import counters as _counters
from ..kernels import cache as _cache, exprs
from . import devmath, memory

_CONST = re.compile(r"kc_(\w+?)\[(\d+)\]")

# (``np`` in a kernel is lazynp.cuda.devmath: NumPy's functions lowered for the device; the
# CPU kernels' vectorizable ``_fexp`` is its exp: a device function would need a GPU to compile)
_PRELUDE = """import math
from lazynp.cuda import devmath as np
import numba as nb
from numba import cuda

_fexp = np.exp

"""

_COMBINE = {"sum": "a + b", "mean": "a + b", "prod": "a * b",
            "max": "b if (b > a or b != b) else a", "min": "b if (b < a or b != b) else a",
            "any": "a | b", "all": "a & b"}


def _nb(dt: np.dtype) -> str:
    return "nb.boolean" if dt.kind == "b" else f"nb.{dt.name}"


def acc_dtype(kind: str, src: np.dtype, out: np.dtype) -> np.dtype:
    """The accumulator of a reduction (float32 sums accumulate in float64, as the CPU
    kernels do: a long float32 chain drifts, NumPy sums pairwise)."""
    if kind in ("any", "all"):
        return np.dtype(np.int32)
    if kind in ("sum", "mean", "prod") and out == np.float32:
        return np.dtype(np.float64)
    if kind in ("sum", "mean", "prod") and out == np.complex64:
        return np.dtype(np.complex128)
    return out


def _init(kind: str, acc: np.dtype) -> str:
    if kind == "max":
        if acc.kind == "f":
            return f"np.{acc.name}(-np.inf)"
        return f"np.{acc.name}({np.iinfo(acc).min})"
    if kind == "min":
        if acc.kind == "f":
            return f"np.{acc.name}(np.inf)"
        return f"np.{acc.name}({np.iinfo(acc).max})"
    if kind == "any":
        return "np.int32(0)"
    if kind == "all":
        return "np.int32(1)"
    return f"np.{acc.name}({1 if kind == 'prod' else 0})"


def _step(kind: str, v: str, indent: str) -> list:
    if kind in ("sum", "mean"):
        return [f"{indent}acc = acc + {v}"]
    if kind == "prod":
        return [f"{indent}acc = acc * {v}"]
    if kind == "max":
        return [f"{indent}vv = {v}", f"{indent}acc = vv if (vv > acc or vv != vv) else acc"]
    if kind == "min":
        return [f"{indent}vv = {v}", f"{indent}acc = vv if (vv < acc or vv != vv) else acc"]
    if kind == "any":
        return [f"{indent}if {v} != 0:", f"{indent}    acc = np.int32(1)"]
    return [f"{indent}if {v} == 0:", f"{indent}    acc = np.int32(0)"]


def scalar_lines(lines: list) -> tuple:
    """The layout's statements with packed constants ``kc_<dtype>[i]`` turned into scalar
    kernel arguments ``kc_<dtype>_i`` (a launch passes scalars, no constant upload); and
    the argument names in order."""
    names: list = []

    def sub(m):
        name = f"kc_{m.group(1)}_{m.group(2)}"
        if name not in names:
            names.append(name)
        return name
    out = [_CONST.sub(sub, line) for line in lines]
    return out, names


def const_names(layout) -> list:
    """The scalar constant argument names for ``layout``, in the order of
    :func:`const_values`."""
    return [f"kc_{n}_{i}" for n, arr in zip(layout.const_names, layout.const_arrays)
            for i in range(len(arr))]


def const_values(layout) -> list:
    return [arr[i] for arr in layout.const_arrays for i in range(len(arr))]


def _loads(n_in: int, bcast, flat: bool, indent: str, flat_idx: str, nd: int) -> list:
    out = []
    for k in range(n_in):
        if flat:
            out.append(f"{indent}v{k} = x{k}[{flat_idx}]")
        else:
            ix = ", ".join("0" if bcast[k][d] else f"i{d}" for d in range(nd))
            out.append(f"{indent}v{k} = x{k}[{ix}]")
    return out


def _unravel(dims: list, flat: str, indent: str) -> list:
    """Statements setting ``i<d>`` for ``d`` in ``dims`` (C order) from index ``flat``."""
    if not dims:
        return []
    if len(dims) == 1:
        return [f"{indent}i{dims[0]} = {flat}"]
    out = [f"{indent}r_ = {flat}"]
    for d in reversed(dims[1:]):
        out += [f"{indent}i{d} = r_ % s{d}", f"{indent}r_ = r_ // s{d}"]
    out.append(f"{indent}i{dims[0]} = r_")
    return out


def elementwise_source(lines: list, consts: list, n_in: int, out_idx: tuple, ndim: int,
                       flat: bool, bcast) -> str:
    """A grid-stride kernel storing members ``out_idx`` (their ``t<k>``) into ``o0..``."""
    lines, _ = scalar_lines(lines)
    ins = [f"x{k}" for k in range(n_in)]
    outs = [f"o{j}" for j in range(len(out_idx))]
    dims = [] if flat else [f"s{d}" for d in range(1, ndim)]
    params = ins + consts + outs + ["n"] + dims
    idx = "i" if flat else ", ".join(f"i{d}" for d in range(ndim))
    b = [f"def kernel({', '.join(params)}):",
         "    i = cuda.grid(1)",
         "    step = cuda.gridsize(1)",
         "    while i < n:"]
    ind = " " * 8
    if not flat:
        b += _unravel(list(range(ndim)), "i", ind)
    b += _loads(n_in, bcast, flat, ind, "i", ndim)
    b += [ind + line for line in lines]
    b += [f"{ind}o{j}[{idx}] = t{k}" for j, k in enumerate(out_idx)]
    b.append(f"{ind}i += step")
    return _PRELUDE + "\n@cuda.jit\n" + "\n".join(b) + "\n"


def reduction_source(lines: list, consts: list, n_in: int, out_idx: tuple, ndim: int,
                     flat: bool, bcast, kind: str, red_axes: tuple, src: int,
                     src_dtype: np.dtype, acc: np.dtype, block: int) -> str:
    """Block reduction of member ``src`` over ``red_axes``: partials ``part[m, p]``."""
    lines, _ = scalar_lines(lines)
    ins = [f"x{k}" for k in range(n_in)]
    outs = [f"o{j}" for j in range(len(out_idx))]
    dims = [f"s{d}" for d in range(ndim)]
    params = ins + consts + outs + ["part", "M", "L", "P"] + dims
    kept = [d for d in range(ndim) if d not in red_axes]
    idx = "j" if flat else ", ".join(f"i{d}" for d in range(ndim))
    v = exprs.cast(f"t{src}", src_dtype, acc) if kind not in ("max", "min", "any", "all") \
        else f"t{src}"
    b = [f"def kernel({', '.join(params)}):",
         f"    sm = cuda.shared.array({block}, {_nb(acc)})",
         "    tid = cuda.threadIdx.x",
         "    bb = cuda.blockIdx.x",
         "    while bb < M * P:",
         "        m = bb // P",
         "        p = bb - m * P"]
    b += _unravel(kept, "m", " " * 8)
    b += [f"        acc = {_init(kind, acc)}",
          f"        j = p * {block} + tid",
          "        while j < L:"]
    ind = " " * 12
    if not flat:
        b += _unravel(list(red_axes), "j", ind)
    b += _loads(n_in, bcast, flat, ind, "j", ndim)
    b += [ind + line for line in lines]
    b += [f"{ind}o{j}[{idx}] = t{k}" for j, k in enumerate(out_idx)]
    b += _step(kind, v, ind)
    b += [f"{ind}j += P * {block}",
          "        sm[tid] = acc",
          "        cuda.syncthreads()",
          f"        s = {block // 2}",
          "        while s > 0:",
          "            if tid < s:",
          "                a = sm[tid]",
          "                b = sm[tid + s]",
          f"                sm[tid] = {_COMBINE[kind]}",
          "            cuda.syncthreads()",
          "            s //= 2",
          "        if tid == 0:",
          "            part[m, p] = sm[0]",
          "        cuda.syncthreads()",
          "        bb += cuda.gridDim.x"]
    return _PRELUDE + "\n@cuda.jit\n" + "\n".join(b) + "\n"


def outer_reduction_source(lines: list, consts: list, n_in: int, out_idx: tuple, ndim: int,
                           bcast, kind: str, red_axes: tuple, src: int, src_dtype: np.dtype,
                           acc: np.dtype) -> str:
    """A reduction that keeps the last axis (``x.sum(axis=0)`` of a matrix): one thread per
    (kept element ``m``, slice ``p``) accumulates its slice of the reduced elements
    serially into ``part[m, p]``.  Consecutive threads take consecutive ``m``, so a warp
    reads contiguous memory (the block reduction would read down columns); the slices
    (``P`` of them, strided by ``P``) give parallelism when few elements are kept."""
    lines, _ = scalar_lines(lines)
    ins = [f"x{k}" for k in range(n_in)]
    outs = [f"o{j}" for j in range(len(out_idx))]
    dims = [f"s{d}" for d in range(ndim)]
    params = ins + consts + outs + ["part", "M", "L", "P"] + dims
    kept = [d for d in range(ndim) if d not in red_axes]
    idx = ", ".join(f"i{d}" for d in range(ndim))
    v = exprs.cast(f"t{src}", src_dtype, acc) if kind not in ("max", "min", "any", "all") \
        else f"t{src}"
    b = [f"def kernel({', '.join(params)}):",
         "    t = cuda.grid(1)",
         "    step = cuda.gridsize(1)",
         "    while t < M * P:",
         "        p = t // M",
         "        m = t - p * M"]
    b += _unravel(kept, "m", " " * 8)
    b += [f"        acc = {_init(kind, acc)}",
          "        j = p",
          "        while j < L:"]
    ind = " " * 12
    b += _unravel(list(red_axes), "j", ind)
    b += _loads(n_in, bcast, False, ind, "j", ndim)
    b += [ind + line for line in lines]
    b += [f"{ind}o{j}[{idx}] = t{k}" for j, k in enumerate(out_idx)]
    b += _step(kind, v, ind)
    b += [f"{ind}j += P",
          "        part[m, p] = acc",
          "        t += step"]
    return _PRELUDE + "\n@cuda.jit\n" + "\n".join(b) + "\n"


def finish_source(kind: str, acc: np.dtype, out: np.dtype) -> str:
    """Combine each output element's partials; ``mean`` divides by the count."""
    if kind == "mean":
        final = exprs.cast("(acc / L)", None, out)
    elif kind in ("any", "all"):
        final = "(acc != 0)"
    else:
        final = exprs.cast("acc", acc, out)
    b = ["def kernel(part, r0, M, P, L):",
         "    m = cuda.grid(1)",
         "    step = cuda.gridsize(1)",
         "    while m < M:",
         "        acc = part[m, 0]",
         "        for q in range(1, P):",
         "            a = acc",
         "            b = part[m, q]",
         f"            acc = {_COMBINE[kind]}",
         f"        r0[m] = {final}",
         "        m += step"]
    return _PRELUDE + "\n@cuda.jit\n" + "\n".join(b) + "\n"


_kernels: dict = {}
#: ``cuda_kernel_compiles``: kernels compiled in this process, one per (source, argument
#: types) on a GPU (numba-cuda's disk cache missed); under the simulator, which compiles
#: nothing, one per source that was not in the disk cache yet.  ``cuda_kernel_cache_hits``:
#: the same, loaded from the disk cache instead.
STATS = {"cuda_kernel_compiles": 0, "cuda_kernel_cache_hits": 0}
CACHE_PREFIX = _cache.PREFIX + "cuda_"


class LoweringError(NotImplementedError):
    """A kernel calls a NumPy function the CUDA code generator cannot lower."""


def check_lowerable(source: str) -> None:
    """Raise :class:`LoweringError` naming each NumPy function of ``source`` that
    :mod:`lazynp.cuda.devmath` does not lower (instead of a ``KeyError`` from numba-cuda
    when the kernel compiles)."""
    missing = devmath.missing_functions(source)
    if missing:
        raise LoweringError("lazynp: the CUDA code generator cannot lower "
                            + ", ".join(f"np.{m}" for m in missing)
                            + " (no device template in lazynp.cuda.devmath)")


class _Probe:
    """A node's fields that :func:`lazynp.kernels.exprs.node_expr` reads."""

    __slots__ = ("op", "dtype", "params", "args", "shape")

    def __init__(self, op, dtype):
        self.op, self.dtype, self.params, self.args, self.shape = op, dtype, None, (), (1,)


_PY_DTYPES = {bool: np.dtype(bool), int: np.dtype(np.int64), float: np.dtype(np.float64),
              complex: np.dtype(np.complex128)}
_op_problems: dict = {}


def op_lowering_problem(op, keys: tuple, out: np.dtype, const_exponent: bool = False):
    """None when a fused kernel can compute elementwise ``op`` on operands of ``keys``
    (dtypes, or the Python types of scalars) into ``out``, or when the op is not fused
    (it then runs on CuPy); else why not, naming the op.  The kernel expression is the
    one the code generator would write (:func:`lazynp.kernels.exprs.node_expr`, the
    arguments already in NumPy's loop dtypes), and each function it calls is checked with
    :func:`lazynp.cuda.devmath.lowers`.  Cached per (op, keys, out)."""
    ck = (op, keys, out, const_exponent)
    problem = _op_problems.get(ck, False)
    if problem is not False:
        return problem
    problem = None
    uf = op.ufunc
    if uf is not None:
        values = [_PY_DTYPES[k] if type(k) is type else k for k in keys]
        expr = exprs.node_expr(_Probe(op, out), [f"v{i}" for i in range(len(keys))], values,
                               list(keys), const_exponent)
        if expr is not None:
            try:
                ins = uf.resolve_dtypes(tuple(keys) + (None,) * uf.nout)[:uf.nin]
            except Exception:
                ins = tuple(values)
            calls = devmath.missing_functions(expr) + devmath.called_functions(expr) + \
                (["exp"] if "_fexp(" in expr else [])
            for f in calls:
                nin = getattr(getattr(np, f, None), "nin", 1)
                bad = [d for d in dict.fromkeys(ins) if not devmath.lowers(f, (d,) * nin)]
                if bad:
                    problem = (f"lazynp: {op.name} of {', '.join(str(v) for v in values)} "
                               f"cannot run on a CUDA device: the CUDA code generator cannot "
                               f"lower np.{f} for {bad[0]} (no device template in "
                               f"lazynp.cuda.devmath)")
                    break
    _op_problems[ck] = problem
    return problem


def check_op(op, keys: tuple, out: np.dtype, const_exponent: bool = False) -> None:
    """Raise :class:`LoweringError` when :func:`op_lowering_problem` finds one: at record
    time, naming the op, not when a later read compiles the kernel."""
    problem = op_lowering_problem(op, keys, out, const_exponent)
    if problem is not None:
        raise LoweringError(problem)


_warnings_lock = threading.Lock()


def _performance_warnings() -> tuple:
    """numba-cuda's ``NumbaPerformanceWarning`` (its own class since it left Numba) and
    Numba's."""
    out = []
    for module in ("numba.cuda.core.errors", "numba.core.errors"):
        try:
            out.append(__import__(module, fromlist=["x"]).NumbaPerformanceWarning)
        except (ImportError, AttributeError):
            pass
    return tuple(out)


_PERF_WARNINGS: list = []


class QuietLaunch:
    """A kernel whose launch configuration (``kernel[grid, block, stream]``) does not warn
    ``NumbaPerformanceWarning`` for a grid under 128 blocks: lazynp sizes its own grids (a
    small array is a small grid), and under ``-W error`` the warning would be raised as the
    kernel's error.  The user's own kernels keep the warning; other warnings are untouched.

    On a GPU the launch also counts numba-cuda's compiles and disk-cache loads (a launch
    with new argument types does one of them)."""

    __slots__ = ("kernel", "specializations")

    def __init__(self, kernel):
        self.kernel = kernel
        self.specializations = 0

    def __getitem__(self, config):
        if not _PERF_WARNINGS:
            _PERF_WARNINGS.append(_performance_warnings())
        with _warnings_lock, warnings.catch_warnings():
            for category in _PERF_WARNINGS[0]:
                warnings.filterwarnings("ignore", category=category)
            launch = self.kernel[config]
        if not hasattr(self.kernel, "stats"):       # (the simulator's: nothing compiles)
            return launch
        return _CountingLaunch(self, launch, self.kernel.overloads)


class _CountingLaunch:
    """A configured launch that, when the kernel got a new specialization, counts whether
    numba-cuda compiled it or loaded it from its disk cache."""

    __slots__ = ("owner", "launch", "overloads")

    def __init__(self, owner: QuietLaunch, launch, overloads):
        self.owner = owner
        self.launch = launch
        self.overloads = overloads

    def __call__(self, *args):
        out = self.launch(*args)
        owner = self.owner
        if len(self.overloads) != owner.specializations:
            owner.specializations = len(self.overloads)
            stats = owner.kernel.stats
            misses = sum(stats.cache_misses.values())
            hits = sum(stats.cache_hits.values())
            new_misses = misses - STATS_SEEN.get(id(owner), (0, 0))[0]
            STATS["cuda_kernel_compiles"] += new_misses
            STATS["cuda_kernel_cache_hits"] += hits - STATS_SEEN.get(id(owner), (0, 0))[1]
            STATS_SEEN[id(owner)] = (misses, hits)
            if new_misses:
                _evict()            # (numba-cuda wrote the new code's files)
        return out


STATS_SEEN: dict = {}          # id(QuietLaunch) -> (cache misses, hits) counted so far


def _evict() -> None:
    try:
        _cache.evict()
    except OSError:
        pass


def _devmath_fingerprint() -> str:
    """A digest of :mod:`lazynp.cuda.devmath`'s source: its lowerings are compiled into
    every kernel, so a change to them must not load code cached before it."""
    if not _FINGERPRINT:
        try:
            with open(devmath.__file__, "rb") as f:
                _FINGERPRINT.append(hashlib.sha1(f.read()).hexdigest()[:16])
        except OSError:
            _FINGERPRINT.append("unknown")
    return _FINGERPRINT[0]


_FINGERPRINT: list = []


def cache_module_source(source: str) -> tuple:
    """``(module name, module source)`` of a kernel in the disk cache: the source with
    ``cache=True`` on its ``cuda.jit`` and a first line naming the devmath it was made
    with; the name's digest covers both."""
    text = (f"# lazynp CUDA kernel (devmath {_devmath_fingerprint()})\n"
            + source.replace("\n@cuda.jit\n", "\n@cuda.jit(cache=True)\n"))
    digest = hashlib.sha1(text.encode()).hexdigest()[:20]
    return CACHE_PREFIX + digest, text


def _load_kernel(source: str):
    """The dispatcher of ``source``, imported from its file in the disk cache (written
    unless there); returns ``(dispatcher, found on disk)``.  A folder that cannot be
    written: compiled in memory, no disk cache."""
    name, text = cache_module_source(source)
    try:
        path = _cache.source_path(name)
        found = os.path.exists(path)
        path = _cache.write_source(name, text)
        _cache.mark_used(name, path)
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod         # (numba-cuda's cache re-imports it by name)
        spec.loader.exec_module(mod)
    except OSError:
        found = False
        mod = type(sys)(name)
        exec(compile(text.replace("cache=True", "cache=False"), name, "exec"), mod.__dict__)
    return mod.kernel, found


def compile_source(source: str):
    """The Numba CUDA dispatcher for ``source`` (each source loaded once per process, from
    the disk cache when an earlier process made it; numba-cuda specializes it per argument
    types on first launch, loading the compiled code from its disk cache when it can)."""
    k = _kernels.get(source)
    if k is None:
        check_lowerable(source)
        kernel, found = _load_kernel(source)
        k = _kernels[source] = QuietLaunch(kernel)
        if memory.simulated():
            STATS["cuda_kernel_cache_hits" if found else "cuda_kernel_compiles"] += 1
            if not found:
                _evict()
    return k


_counters.register_table(STATS)
