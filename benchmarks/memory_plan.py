"""Memory planning: naive vs planned internal memory of compiled lazynp plans.

MXNet's paper reports about 2x less internal memory for training and 4x for inference with
inplace + co-share planning.  Internal memory excludes inputs, constants (weights) and the
function's results; "naive" gives every op's result its own buffer; "planned" is the plan's
shared buffers plus results of ops that allocate on every call.

Targets: inference planned <= 0.25x naive, training (forward + backward) <= 0.5x naive.

Besides in-place and co-share, a graph that is row-local along its batch and has over 1 MiB
of intermediates runs in slices of the batch (passes/batch_tile.py): the "tiles" column says
into how many (1: not tiled), and the last column is the liveness lower bound of the plan's
schedule (for a tiled plan, the schedule of one slice).
"""
from __future__ import annotations

import sys

import numpy

import lazynp as np

INFER_TARGET = 0.25
TRAIN_TARGET = 0.5


def mlp_params(rng, sizes, dtype="float32"):
    return [(rng.standard_normal((a, b)).astype(dtype) * 0.05, numpy.zeros(b, dtype))
            for a, b in zip(sizes[:-1], sizes[1:])]


def mlp_forward(params, x):
    h = x
    for k, (w, b) in enumerate(params):
        h = h @ w + b
        if k < len(params) - 1:
            h = np.maximum(h, 0.0)
    return h


def mlp_loss(params, x, y):
    logits = mlp_forward(params, x)
    m = logits.max(axis=1, keepdims=True)
    z = logits - m
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return -(logp * y).sum() / x.shape[0]


def conv2d(x, w):
    # x: (N, C, H, W), w: (K, C, R, S) -> (N, K, H-R+1, W-S+1), NumPy style
    win = np.lib.stride_tricks.sliding_window_view(x, w.shape[2:], axis=(2, 3))
    return np.einsum("nchwrs,kcrs->nkhw", win, w)


def maxpool2(h):
    n, c, hh, ww = h.shape
    h = h[:, :, :hh // 2 * 2, :ww // 2 * 2]
    return h.reshape(n, c, hh // 2, 2, ww // 2, 2).max(axis=(3, 5))


def bn(h, mean, scale, shift):
    """Batch normalization in inference mode (per-channel statistics)."""
    return (h - mean[:, None, None]) * scale[:, None, None] + shift[:, None, None]


def convnet(params, x):
    """(conv3x3 + bias, batch norm, relu, 2x2 max pool) twice; dense + relu; dense;
    softmax."""
    w1, b1, w2, b2, wd, bd, wo, bo, s1, s2 = params
    h = maxpool2(np.maximum(bn(conv2d(x, w1) + b1[:, None, None], *s1), 0.0))
    h = maxpool2(np.maximum(bn(conv2d(h, w2) + b2[:, None, None], *s2), 0.0))
    h = h.reshape(h.shape[0], -1)
    h = np.maximum(h @ wd + bd, 0.0)
    z = h @ wo + bo
    z = np.exp(z - z.max(axis=1, keepdims=True))
    return z / z.sum(axis=1, keepdims=True)


def convnet_bare(params, x):
    """The plainest reading of the workload: (conv3x3, relu) twice, then one dense layer."""
    w1, w2, wd = params
    h = np.maximum(conv2d(x, w1), 0.0)
    h = np.maximum(conv2d(h, w2), 0.0)
    return h.reshape(h.shape[0], -1) @ wd


def convnet_bare_params(rng):
    f = "float32"
    return (rng.standard_normal((8, 3, 3, 3)).astype(f) * 0.1,
            rng.standard_normal((16, 8, 3, 3)).astype(f) * 0.1,
            rng.standard_normal((16 * 24 * 24, 10)).astype(f) * 0.01)


def convnet_params(rng):
    f = "float32"
    return (rng.standard_normal((8, 3, 3, 3)).astype(f) * 0.1, numpy.zeros(8, f),
            rng.standard_normal((16, 8, 3, 3)).astype(f) * 0.1, numpy.zeros(16, f),
            rng.standard_normal((16 * 5 * 5, 64)).astype(f) * 0.05, numpy.zeros(64, f),
            rng.standard_normal((64, 10)).astype(f) * 0.1, numpy.zeros(10, f),
            (numpy.full(8, 0.1, f), numpy.full(8, 1.1, f), numpy.full(8, 0.05, f)),
            (numpy.full(16, 0.1, f), numpy.full(16, 0.9, f), numpy.full(16, 0.05, f)))


def recurrence(x, a, b):
    h = x
    for _ in range(20):
        h = np.tanh(h * a + x * b) + 0.5 * h
    return h


def report(name, r, target, info=False):
    """One row; the last column is the liveness lower bound of the schedule (while a step
    runs, its inputs still needed and its outputs must all have memory), below which no
    in-place/co-share plan can go."""
    ratio = r["planned_bytes"] / r["naive_bytes"]
    ok = ratio <= target or info
    print(f"{name:<34} naive {r['naive_bytes'] / 2**20:9.3f} MiB  planned "
          f"{r['planned_bytes'] / 2**20:9.3f} MiB  buffers {r['num_buffers']:3d}  "
          f"tiles {r.get('batch_tiles', 1):2d}  "
          f"ratio {ratio:6.3f}  target <= {target}  "
          f"{'info' if info else 'PASS' if ok else 'FAIL'}  "
          f"(any plan >= {r['lower_bound_bytes'] / r['naive_bytes']:.3f})")
    return ok


def main() -> int:
    rng = numpy.random.default_rng(0)
    ok = True
    sizes = [784, 512, 512, 512, 10]
    params = mlp_params(rng, sizes)
    x = rng.standard_normal((128, 784)).astype("float32")
    y = numpy.eye(10, dtype="float32")[rng.integers(0, 10, 128)]

    infer = np.jit(lambda p, x: mlp_forward(p, x))
    ok &= report("MLP 784-512x3-10 b128 inference", infer.memory_report(params, x),
                 INFER_TARGET)
    try:
        train = np.jit(np.grad(mlp_loss))
        r = train.memory_report(params, x, y)
    except Exception as exc:  # autodiff not available
        print(f"MLP training: skipped ({type(exc).__name__}: {exc})")
    else:
        ok &= report("MLP 784-512x3-10 b128 training", r, TRAIN_TARGET)
        # the gradients must be right
        g = train(params, x, y)
        g_eager = np.grad(mlp_loss)(params, x, y)
        for (gw, gb), (ew, eb) in zip(g, g_eager):
            numpy.testing.assert_allclose(numpy.asarray(gw), numpy.asarray(ew), rtol=2e-3,
                                          atol=1e-5)

    cparams = convnet_params(rng)
    cx = rng.standard_normal((32, 3, 28, 28)).astype("float32")
    cinfer = np.jit(convnet)
    ok &= report("convnet 2 conv + dense inference", cinfer.memory_report(cparams, cx),
                 INFER_TARGET)
    out = cinfer(cparams, cx)
    numpy.testing.assert_allclose(numpy.asarray(out), numpy.asarray(convnet(cparams, np.asarray(cx))),
                                  rtol=1e-4, atol=1e-5)
    try:
        ctrain = np.jit(np.grad(lambda p, x: -np.log(convnet(p, x)[:, 0]).sum()))
        r = ctrain.memory_report(cparams, cx)
    except Exception as exc:
        print(f"convnet training: skipped ({type(exc).__name__}: {exc})")
    else:
        ok &= report("convnet 2 conv + dense training", r, TRAIN_TARGET)

    bparams = convnet_bare_params(rng)
    binfer = np.jit(convnet_bare)
    ok &= report("convnet bare (conv,relu)x2+dense inf", binfer.memory_report(bparams, cx),
                 INFER_TARGET)
    numpy.testing.assert_allclose(numpy.asarray(binfer(bparams, cx)),
                                  numpy.asarray(convnet_bare(bparams, np.asarray(cx))),
                                  rtol=1e-4, atol=1e-5)
    # MXNet's heuristics alone (no slices of the batch), for comparison
    report("  (same, untiled)", np.jit(convnet_bare, tile=False).memory_report(bparams, cx),
           INFER_TARGET, info=True)
    report("  (convnet with bias etc., untiled)",
           np.jit(convnet, tile=False).memory_report(cparams, cx), INFER_TARGET, info=True)

    rx = rng.standard_normal((256, 256))
    rec = np.jit(recurrence)
    ok &= report("20-step elementwise recurrence", rec.memory_report(rx, 0.9, 0.1),
                 INFER_TARGET)
    rec_nofuse = np.jit(recurrence, fuse=False)
    ok &= report("  (same, fusion off: planner only)", rec_nofuse.memory_report(rx, 0.9, 0.1),
                 INFER_TARGET)
    numpy.testing.assert_allclose(numpy.asarray(rec(rx, 0.9, 0.1)),
                                  numpy.asarray(rec_nofuse(rx, 0.9, 0.1)), rtol=1e-12)
    print("OVERALL", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
