"""Whole-array programs: statistics, small machine learning (training and inference),
convolutions and a small CNN, simulations, image and time-series code, sorting-based
grouping.

Each program is ``program(np, *inputs)``; the inputs come from the ``*_inputs(rng, ...)``
function next to it.
"""
from __future__ import annotations

import numpy as _numpy   # only to build inputs; the programs use the module they are given


# --- statistics --------------------------------------------------------------------------------------

def covariance(np, data):
    """Sample covariance matrix of the columns: mean, centring, one matmul (whole-array)."""
    data = np.asarray(data)
    n = data.shape[0]
    centred = data - data.mean(axis=0)
    return centred.T @ centred / (n - 1)


def correlation(np, data):
    """Pearson correlation matrix, with near-constant columns guarded by a boolean-mask write
    and the diagonal set through fancy indexing (whole-array)."""
    data = np.asarray(data)
    n, m = data.shape
    mean = data.mean(axis=0)
    std = data.std(axis=0)
    std[std <= 0.1] = 1.0
    z = (data - mean) / (np.sqrt(n) * std)
    corr = z.T @ z
    corr[np.arange(m), np.arange(m)] = 1.0
    return corr


def table_inputs(rng, n, m):
    """n samples of m correlated features (a few columns nearly constant)."""
    base = rng.standard_normal((n, m // 4 + 1))
    mix = rng.standard_normal((m // 4 + 1, m))
    data = base @ mix + 0.5 * rng.standard_normal((n, m))
    data[:, ::17] *= 0.01
    return (data,)


# --- convolutions and a small CNN ----------------------------------------------------------------------

def conv2d_bias(np, x, w, bias):
    """Batched multi-channel 2-D convolution (valid) with ``sliding_window_view`` and
    ``einsum``, plus a per-channel bias (cnn)."""
    x = np.asarray(x)
    w = np.asarray(w)
    bias = np.asarray(bias)
    kh, kw = w.shape[2:]
    windows = np.lib.stride_tricks.sliding_window_view(x, (kh, kw), axis=(2, 3))
    out = np.einsum("nchwij,kcij->nkhw", windows, w, optimize=True)
    return out + bias[None, :, None, None]


def conv2d_offsets(np, x, w, bias):
    """The same convolution written as a loop over the kernel offsets, each a channel
    contraction of a shifted slice (``tensordot``), then bias and ReLU (cnn)."""
    x = np.asarray(x)
    w = np.asarray(w)
    bias = np.asarray(bias)
    n, c, h, wd = x.shape
    k, _, kh, kw = w.shape
    oh, ow = h - kh + 1, wd - kw + 1
    out = np.zeros((n, k, oh, ow))
    for i in range(kh):
        for j in range(kw):
            patch = x[:, :, i:i + oh, j:j + ow]                  # n, c, oh, ow
            out += np.tensordot(patch, w[:, :, i, j], axes=([1], [1])).transpose(0, 3, 1, 2)
    out += bias[:, None, None]
    return np.maximum(out, 0.0)


def conv_inputs(rng, n, c, h, k):
    """A batch of n images with c channels of h x h pixels, k 3x3 filters, a bias."""
    return (rng.standard_normal((n, c, h, h)), rng.standard_normal((k, c, 3, 3)) / 3.0,
            rng.standard_normal(k))


def cnn_inference(np, images, w1, b1, w2, b2, wd, bd):
    """Small CNN inference: two (conv 3x3 + ReLU + 2x2 max-pool) blocks, flatten, dense,
    softmax, argmax (cnn)."""
    x = np.asarray(images)

    def conv_relu(x, w, b):
        w = np.asarray(w)
        win = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(2, 3))
        y = np.tensordot(win, w, axes=([1, 4, 5], [1, 2, 3]))   # n, h, w, k
        y = y.transpose(0, 3, 1, 2) + np.asarray(b)[None, :, None, None]
        return np.maximum(y, 0.0)

    def max_pool(x):
        n, c, h, w = x.shape
        x = x[:, :, : h // 2 * 2, : w // 2 * 2]
        return x.reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))

    x = max_pool(conv_relu(x, w1, b1))
    x = max_pool(conv_relu(x, w2, b2))
    x = x.reshape(x.shape[0], -1)
    logits = x @ np.asarray(wd) + np.asarray(bd)
    logits -= logits.max(axis=1, keepdims=True)
    prob = np.exp(logits)
    prob /= prob.sum(axis=1, keepdims=True)
    return prob, prob.argmax(axis=1)


def cnn_inputs(rng, n, h):
    """n single-channel h x h images and the weights of the network (10 classes)."""
    c1, c2 = 8, 16
    side = ((h - 2) // 2 - 2) // 2
    return (rng.standard_normal((n, 1, h, h)),
            rng.standard_normal((c1, 1, 3, 3)) / 3.0, 0.1 * rng.standard_normal(c1),
            rng.standard_normal((c2, c1, 3, 3)) / 8.5, 0.1 * rng.standard_normal(c2),
            rng.standard_normal((c2 * side * side, 10)) / (4.0 * side), _numpy.zeros(10))


# --- machine learning ------------------------------------------------------------------------------------

def kmeans(np, X, k, iters):
    """Lloyd's k-means: broadcast distances, argmin labels, centroids updated per cluster with
    a boolean mask (whole-array)."""
    X = np.asarray(X)
    C = X[:k].copy()
    labels = np.zeros(X.shape[0], dtype=np.int64)
    for _ in range(iters):
        d2 = ((X[:, None, :] - C[None, :, :]) ** 2).sum(axis=2)
        labels = d2.argmin(axis=1)
        for c in range(k):
            members = X[labels == c]
            if len(members) > 0:
                C[c] = members.mean(axis=0)
    return C, labels


def blobs_inputs(rng, n, d, k, iters):
    """n points in d dimensions around k random centres."""
    centres = rng.uniform(-8.0, 8.0, size=(k, d))
    X = centres[rng.integers(0, k, size=n)] + rng.standard_normal((n, d))
    return X, k, iters


def logistic_regression(np, X, y, steps, lr):
    """Logistic regression trained by batch gradient descent with L2 penalty; the loss is read
    every 10 steps, as training loops print it (whole-array: matvec, exp, log)."""
    X = np.asarray(X)
    y = np.asarray(y)
    n, d = X.shape
    w = np.zeros(d)
    b = 0.0
    losses = []
    for step in range(steps):
        z = X @ w + b
        p = 1.0 / (1.0 + np.exp(-z))
        err = p - y
        w -= lr * (X.T @ err / n + 1e-3 * w)
        b -= lr * err.mean()
        if step % 10 == 0:
            eps = 1e-12
            loss = -np.mean(y * np.log(p + eps) + (1 - y) * np.log(1 - p + eps))
            losses.append(float(loss))
    return w, b, np.array(losses)


def classification_inputs(rng, n, d, steps):
    """A linearly separable-ish binary problem, a step count and a learning rate."""
    X = rng.standard_normal((n, d))
    w = rng.standard_normal(d)
    y = (X @ w + 0.5 * rng.standard_normal(n) > 0).astype(_numpy.float64)
    return X, y, steps, 0.5


def mlp_softmax(np, X, labels, W1, b1, W2, b2, W3, b3):
    """MLP inference: three dense layers with ReLU, a numerically stable softmax, predictions,
    accuracy and the cross-entropy of the true labels (fancy indexing) (whole-array)."""
    X = np.asarray(X)
    labels = np.asarray(labels)
    W1, b1, W2, b2, W3, b3 = (np.asarray(a) for a in (W1, b1, W2, b2, W3, b3))
    h = np.maximum(X @ W1 + b1, 0.0)
    h = np.maximum(h @ W2 + b2, 0.0)
    logits = h @ W3 + b3
    shifted = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    prob = e / e.sum(axis=1, keepdims=True)
    pred = prob.argmax(axis=1)
    accuracy = (pred == labels).mean()
    nll = -np.log(prob[np.arange(X.shape[0]), labels]).mean()
    return prob, pred, accuracy, nll


def mlp_inputs(rng, n, d, hidden):
    """A batch of n inputs with d features, labels, and the weights of a d-hidden-hidden-10
    network."""
    return (rng.standard_normal((n, d)), rng.integers(0, 10, size=n),
            rng.standard_normal((d, hidden)) / _numpy.sqrt(d), 0.1 * rng.standard_normal(hidden),
            rng.standard_normal((hidden, hidden)) / _numpy.sqrt(hidden), _numpy.zeros(hidden),
            rng.standard_normal((hidden, 10)) / _numpy.sqrt(hidden), _numpy.zeros(10))


# --- simulations ---------------------------------------------------------------------------------------------

def monte_carlo_option(np, Z, S0, K, r, sigma, T):
    """Monte-Carlo price of an arithmetic Asian call: log-price paths by ``cumsum`` of normal
    increments, ``exp``, path means, discounted payoff mean and its standard error
    (whole-array)."""
    Z = np.asarray(Z)
    steps = Z.shape[1]
    dt = T / steps
    log_paths = np.cumsum((r - 0.5 * sigma ** 2) * dt + sigma * np.sqrt(dt) * Z, axis=1)
    S = S0 * np.exp(log_paths)
    payoff = np.maximum(S.mean(axis=1) - K, 0.0)
    disc = np.exp(-r * T)
    price = disc * payoff.mean()
    stderr = disc * payoff.std(ddof=1) / np.sqrt(payoff.shape[0])
    return price, stderr


def paths_inputs(rng, paths, steps):
    """Standard normal increments for ``paths`` paths of ``steps`` steps, and the contract."""
    return rng.standard_normal((paths, steps)), 100.0, 100.0, 0.03, 0.25, 1.0


def nbody(np, pos, vel, mass, steps, dt):
    """Direct-sum gravitational n-body, leapfrog-like steps: (n, n, 3) broadcast differences,
    softened inverse cubes, reductions; total energy at the end (whole-array)."""
    pos = np.asarray(pos).copy()
    vel = np.asarray(vel).copy()
    mass = np.asarray(mass)
    soft2 = 0.01
    for _ in range(steps):
        diff = pos[None, :, :] - pos[:, None, :]
        r2 = (diff ** 2).sum(axis=2) + soft2
        inv_r3 = r2 ** -1.5
        acc = (diff * (inv_r3 * mass[None, :])[:, :, None]).sum(axis=1)
        vel += acc * dt
        pos += vel * dt
    kinetic = 0.5 * (mass * (vel ** 2).sum(axis=1)).sum()
    diff = pos[None, :, :] - pos[:, None, :]
    inv_r = 1.0 / np.sqrt((diff ** 2).sum(axis=2) + soft2)
    potential = -0.5 * (mass[:, None] * mass[None, :] * inv_r).sum() \
        + 0.5 * (mass ** 2).sum() / np.sqrt(soft2)
    return pos, vel, kinetic + potential


def bodies_inputs(rng, n, steps):
    """n bodies with random positions, small velocities and masses; steps; dt."""
    return (rng.standard_normal((n, 3)), 0.1 * rng.standard_normal((n, 3)),
            rng.random(n) / n + 0.5 / n, steps, 0.001)


def mandelbrot(np, re, im, maxiter):
    """Mandelbrot escape counts with boolean masks: only the points still bounded are updated
    (complex arithmetic, masked reads and writes) (whole-array)."""
    c = np.asarray(re)[None, :] + 1j * np.asarray(im)[:, None]
    z = np.zeros_like(c)
    counts = np.zeros(c.shape, dtype=np.int32)
    for _ in range(maxiter):
        mask = z.real * z.real + z.imag * z.imag <= 4.0
        z[mask] = z[mask] * z[mask] + c[mask]
        counts[mask] += 1
    return counts


def plane_inputs(rng, n, maxiter):
    """A slightly jittered grid over the set (n x n points) and the iteration count."""
    re = _numpy.linspace(-2.0, 0.6, n) + 1e-7 * rng.standard_normal(n)
    im = _numpy.linspace(-1.2, 1.2, n) + 1e-7 * rng.standard_normal(n)
    return re, im, maxiter


def black_scholes(np, S, K, T, r, sigma):
    """Black-Scholes call and put prices with a polynomial approximation of the normal CDF
    (``np.where``, ``exp``, ``log``, ``sqrt``: a long elementwise chain) (whole-array)."""
    S = np.asarray(S)
    K = np.asarray(K)
    T = np.asarray(T)

    def norm_cdf(x):
        t = 1.0 / (1.0 + 0.2316419 * np.abs(x))
        poly = t * (0.319381530 + t * (-0.356563782 + t * (1.781477937
                                                           + t * (-1.821255978 + t * 1.330274429))))
        tail = 0.3989422804014327 * np.exp(-0.5 * x * x) * poly
        return np.where(x < 0, tail, 1.0 - tail)

    sqrt_t = np.sqrt(T)
    d1 = (np.log(S / K) + (r + 0.5 * sigma * sigma) * T) / (sigma * sqrt_t)
    d2 = d1 - sigma * sqrt_t
    disc = K * np.exp(-r * T)
    call = S * norm_cdf(d1) - disc * norm_cdf(d2)
    put = call - S + disc
    return call, put


def options_inputs(rng, n):
    """n random option contracts (spot, strike, maturity) and the market's rate and vol."""
    return (rng.uniform(50.0, 150.0, n), rng.uniform(50.0, 150.0, n), rng.uniform(0.1, 2.0, n),
            0.03, 0.3)


def horner_poly(np, coeffs, x):
    """A polynomial and its derivative by Horner's rule: a Python loop over the coefficients
    with whole-array multiply-adds (whole-array)."""
    coeffs = np.asarray(coeffs)
    x = np.asarray(x)
    p = np.zeros_like(x)
    dp = np.zeros_like(x)
    for a in coeffs:
        dp = dp * x + p
        p = p * x + a
    return p, dp


def poly_inputs(rng, degree, n):
    """Random coefficients (highest degree first) and n points in [-1, 1]."""
    return rng.standard_normal(degree + 1), rng.uniform(-1.0, 1.0, n)


# --- images, time series, grouping ------------------------------------------------------------------------------

def histogram_equalize(np, images):
    """Histogram equalization of each image: ``bincount``, ``cumsum``, a lookup table applied
    by fancy indexing, then ``np.histogram`` of the result (whole-array)."""
    images = np.asarray(images)
    out = np.empty_like(images)
    counts = []
    for k, img in enumerate(images):
        hist = np.bincount(img.ravel(), minlength=256)
        cdf = hist.cumsum()
        cdf_min = cdf[cdf > 0][0]
        lut = np.round((cdf - cdf_min) / (img.size - cdf_min) * 255.0)
        lut = np.clip(lut, 0, 255).astype(np.uint8)
        out[k] = lut[img]
        counts.append(np.histogram(out[k], bins=16, range=(0, 256))[0])
    return out, np.stack(counts)


def images_inputs(rng, count, h):
    """``count`` low-contrast uint8 images of h x h pixels."""
    base = rng.normal(100.0, 20.0, size=(count, h, h))
    return (_numpy.clip(base, 0, 255).astype(_numpy.uint8),)


def timeseries_stats(np, prices, window):
    """Per-series statistics of price histories: log returns (``diff``), cumulative returns,
    running maximum (``maximum.accumulate``) and drawdown, a moving average via ``cumsum``,
    percentiles (sorting) and a Sharpe ratio (whole-array)."""
    prices = np.asarray(prices)
    returns = np.diff(np.log(prices), axis=1)
    cum = np.cumsum(returns, axis=1)
    peak = np.maximum.accumulate(cum, axis=1)
    max_drawdown = (cum - peak).min(axis=1)
    c = np.cumsum(prices, axis=1)
    moving = (c[:, window:] - c[:, :-window]) / window
    above = (prices[:, window:] > moving).mean(axis=1)
    q05, q95 = np.percentile(returns, [5, 95], axis=1)
    sharpe = returns.mean(axis=1) / returns.std(axis=1) * np.sqrt(252)
    return max_drawdown, above, q05, q95, sharpe


def prices_inputs(rng, series, length):
    """``series`` geometric random walks of ``length`` prices, and the moving window."""
    steps = 0.01 * rng.standard_normal((series, length))
    return 100.0 * _numpy.exp(_numpy.cumsum(steps, axis=1)), 20


def groupby_sort(np, keys, values):
    """Group-by through sorting: ``argsort``, boundaries of equal keys, ``add.reduceat`` for
    sums, counts from ``diff``, group means, and each value's rank within its group
    (whole-array, sorting-based)."""
    keys = np.asarray(keys)
    values = np.asarray(values)
    order = np.argsort(keys, kind="stable")
    k = keys[order]
    v = values[order]
    starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
    sums = np.add.reduceat(v, starts)
    counts = np.diff(np.r_[starts, k.shape[0]])
    means = sums / counts
    group = np.repeat(np.arange(starts.shape[0]), counts)
    centred = v - means[group]
    spread = np.sqrt(np.add.reduceat(centred ** 2, starts) / counts)
    return k[starts], counts, means, spread


def groups_inputs(rng, n, groups):
    """n integer keys drawn from ``groups`` distinct values, and float values."""
    return rng.integers(0, groups, size=n) * 7 + 3, rng.standard_normal(n)
