"""Monte-Carlo estimates of pi with legacy and Generator random APIs."""


def run(np):
    # legacy global RandomState API
    np.random.seed(0)
    n = 20000
    pts = np.random.rand(n, 2)
    inside = (pts ** 2).sum(axis=1) <= 1.0
    pi_legacy = 4.0 * inside.mean()

    # batched estimate, running average
    batches = []
    for _ in range(5):
        x = np.random.rand(4000)
        y = np.random.rand(4000)
        batches.append(4.0 * np.count_nonzero(x * x + y * y < 1.0) / 4000)
    running = np.cumsum(batches) / np.arange(1, 6)

    # new Generator API
    rng = np.random.default_rng(1)
    xy = rng.random((n, 2))
    hits = np.sum(np.hypot(xy[:, 0], xy[:, 1]) < 1.0)
    pi_gen = 4.0 * hits / n
    normals = rng.normal(size=1000)
    ints = rng.integers(0, 10, size=50)

    return {
        "pi_legacy": float(pi_legacy),
        "pi_generator": float(pi_gen),
        "inside_mask": inside,
        "batch_estimates": np.array(batches),
        "running_mean": running,
        "close_to_pi": bool(abs(pi_legacy - np.pi) < 0.05 and abs(pi_gen - np.pi) < 0.05),
        "normals_mean": normals.mean(),
        "ints": ints,
    }
