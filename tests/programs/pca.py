"""Principal component analysis via eigendecomposition of the covariance."""


def run(np):
    np.random.seed(5)
    n, d = 200, 6
    latent = np.random.randn(n, 3) * np.array([5.0, 2.0, 0.5])
    mixing = np.random.randn(3, d)
    X = latent @ mixing + 0.1 * np.random.randn(n, d) + np.arange(d)

    mean = X.mean(axis=0)
    Xc = X - mean
    cov = (Xc.T @ Xc) / (n - 1)
    evals, evecs = np.linalg.eigh(cov)
    order = np.argsort(evals)[::-1]
    evals = evals[order]
    evecs = evecs[:, order]

    # sign normalisation: largest-|.| entry of each eigenvector positive
    idx = np.argmax(np.abs(evecs), axis=0)
    signs = np.sign(evecs[idx, np.arange(d)])
    evecs = evecs * signs

    k = 3
    W = evecs[:, :k]
    Z = Xc @ W
    X_rec = Z @ W.T + mean
    explained = evals / evals.sum()
    rec_err = np.sqrt(np.mean((X - X_rec) ** 2))
    return {
        "eigenvalues": evals,
        "components": W,
        "projection": Z,
        "explained_ratio": explained,
        "cum_explained": np.cumsum(explained),
        "reconstruction_rmse": float(rec_err),
        "cov_matches_np_cov": bool(np.allclose(cov, np.cov(X, rowvar=False))),
    }
