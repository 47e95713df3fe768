"""Conjugate-gradient solve of a symmetric positive definite system."""


def run(np):
    np.random.seed(0)
    n = 60
    M = np.random.randn(n, n)
    A = M.T @ M + n * np.eye(n)
    x_true = np.random.randn(n)
    b = np.dot(A, x_true)

    x = np.zeros(n)
    r = b - A @ x
    p = r.copy()
    rs_old = np.dot(r, r)
    b_norm = np.sqrt(np.dot(b, b))
    residuals = [float(np.sqrt(rs_old))]
    iters = 0
    for i in range(500):
        Ap = A @ p
        alpha = rs_old / np.dot(p, Ap)
        x += alpha * p
        r -= alpha * Ap
        rs_new = np.dot(r, r)
        residuals.append(float(np.sqrt(rs_new)))
        iters = i + 1
        if np.sqrt(rs_new) < 1e-10 * b_norm:
            break
        p = r + (rs_new / rs_old) * p
        rs_old = rs_new

    final_res = np.linalg.norm(b - A @ x) / b_norm
    err = np.abs(x - x_true).max()
    return {
        "x": x,
        "iters": iters,
        "relative_residual_small": bool(final_res < 1e-8),
        "error_small": bool(err < 1e-8),
        "residual_history": np.array(residuals),
    }
