"""Jacobi iteration for a strictly diagonally dominant linear system."""


def run(np):
    np.random.seed(9)
    n = 50
    A = np.random.rand(n, n) - 0.5
    A += np.diag(np.abs(A).sum(axis=1) + 1.0)
    b = np.random.randn(n)

    D = np.diag(A)
    R = A - np.diagflat(D)
    x = np.zeros(n)
    res_hist = []
    iters = 0
    for k in range(1000):
        x_new = (b - R @ x) / D
        iters = k + 1
        delta = np.linalg.norm(x_new - x, ord=np.inf)
        x = x_new
        res = np.linalg.norm(A @ x - b) / np.linalg.norm(b)
        res_hist.append(res)
        if delta < 1e-12:
            break

    x_direct = np.linalg.solve(A, b)
    dominant = np.all(2 * np.abs(D) > np.abs(A).sum(axis=1))
    return {
        "x": x,
        "iters": iters,
        "residual_history": np.array(res_hist),
        "matches_solve": bool(np.allclose(x, x_direct, atol=1e-10)),
        "diag_dominant": bool(dominant),
        "spectral_radius_bound": float(np.max(np.abs(R).sum(axis=1) / np.abs(D))),
    }
