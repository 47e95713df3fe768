"""The on-disk kernel cache (issue 37, Build 5): a settable folder and size bound,
least-recently-used eviction, and clearing it (lazynp.kernels.cache)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy
import pytest

import lazynp
from lazynp.kernels import cache, cpu

SRC = ("import numpy as np\nfrom numba import njit\n"
       "@njit(cache=True)\ndef kernel(x):\n    return x * 2.0 + {}\n")


def _compile(k: int, arg=None):
    arg = numpy.arange(3.0) if arg is None else arg
    kernel = cpu.get_kernel(SRC.format(k), (arg,), block=True)
    assert kernel is not None
    assert (kernel(arg) == arg * 2.0 + k).all()
    return kernel


def _name(k: int) -> str:
    import hashlib
    return cache.PREFIX + hashlib.sha1(SRC.format(k).encode()).hexdigest()[:20]


def _used_at(k: int, seconds: int) -> None:
    """Set kernel k's last use (its source's access time), keeping its modification time."""
    path = cache.source_path(_name(k))
    os.utime(path, ns=(seconds * 10**9, os.stat(path).st_mtime_ns))


def test_a_compiled_kernel_is_kept_in_the_set_folder(kernel_dir):
    _compile(101)
    kernels = cache.entries()
    assert list(kernels) == [_name(101)]
    files = sorted(os.path.relpath(p, kernel_dir) for p in kernels[_name(101)][2])
    assert files[-1] == _name(101) + ".py"
    assert any(f.startswith("__pycache__") and f.endswith(".nbc") for f in files), files
    assert any(f.startswith("__pycache__") and f.endswith(".nbi") for f in files), files
    assert cache.size() == (sum(os.path.getsize(kernel_dir / f) for f in files), 1,
                            len(files))


def test_a_bound_evicts_the_least_recently_used_kernels(kernel_dir):
    for k in (201, 202, 203):
        _compile(k)
    for k, t in ((201, 1000), (202, 3000), (203, 2000)):      # 201 oldest, then 203
        _used_at(k, t)
    sizes = {n: e[0] for n, e in cache.entries().items()}
    assert len(sizes) == 3
    before = lazynp.stats()["kernel_cache_evictions"]
    lazynp.configure(kernel_cache_max_bytes=sizes[_name(202)] + sizes[_name(203)])
    assert set(cache.entries()) == {_name(202), _name(203)}
    lazynp.configure(kernel_cache_max_bytes=sizes[_name(202)])
    assert set(cache.entries()) == {_name(202)}
    assert lazynp.stats()["kernel_cache_evictions"] == before + 2
    assert not [f for f in os.listdir(kernel_dir / "__pycache__")
                if f.startswith(_name(201)) or f.startswith(_name(203))]


def test_a_new_compile_keeps_the_cache_within_its_bound(kernel_dir):
    _compile(301)
    _used_at(301, 1000)
    one = cache.size()[0]
    lazynp.configure(kernel_cache_max_bytes=one + one // 2)    # room for one kernel
    _compile(302)                 # written, then the older one evicted
    assert set(cache.entries()) == {_name(302)}
    assert cache.size()[0] <= one + one // 2


def test_loading_a_kernel_marks_it_used(kernel_dir):
    _compile(401)
    _used_at(401, 1000)
    code = textwrap.dedent(f"""
        import numpy
        from lazynp.kernels import cpu
        k = cpu.get_kernel({SRC.format(401)!r}, (numpy.arange(3.0),), block=True)
        print(cpu.STATS["kernel_cache_hits"], k(numpy.arange(3.0))[1])
    """)
    env = dict(os.environ, LAZYNP_CACHE_DIR=str(kernel_dir))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.split() == ["1", "403.0"]            # a cache hit, the right value
    path = cache.source_path(_name(401))
    assert os.stat(path).st_atime_ns > 1000 * 10**9


def test_clear_deletes_the_files_and_loaded_kernels_keep_working(kernel_dir):
    _compile(501)
    _compile(502)
    nfiles = cache.size()[2]
    assert lazynp.clear_kernel_cache() == nfiles > 0
    assert cache.size() == (0, 0, 0)
    _compile(501, numpy.arange(3))          # the loaded kernel, new argument types
    assert set(cache.entries()) == {_name(501)}


def test_the_environment_sets_folder_and_bound(tmp_path):
    code = textwrap.dedent("""
        from lazynp.kernels import cache
        print(cache.directory(), cache.max_bytes())
    """)
    env = dict(os.environ, LAZYNP_CACHE_DIR=str(tmp_path / "k"),
               LAZYNP_CACHE_MAX_BYTES="3M")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.split() == [str(tmp_path / "k"), str(3 << 20)]
    env["LAZYNP_CACHE_MAX_BYTES"] = "lots"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300, env=env)
    assert p.returncode != 0 and "LAZYNP_CACHE_MAX_BYTES='lots'" in p.stderr


def test_a_negative_bound_is_refused():
    with pytest.raises(ValueError, match="kernel_cache_max_bytes"):
        lazynp.configure(kernel_cache_max_bytes=-1)
