"""K-means clustering with Lloyd iterations."""


def run(np):
    np.random.seed(42)
    k = 4
    centers_true = np.array([[0.0, 0.0], [5.0, 5.0], [-4.0, 6.0], [6.0, -3.0]])
    pts_per = 60
    blobs = []
    for c in centers_true:
        blobs.append(c + 1.8 * np.random.randn(pts_per, 2))
    X = np.concatenate(blobs, axis=0)
    perm = np.random.permutation(X.shape[0])
    X = X[perm]

    # random initialisation: k distinct data points
    init_idx = np.random.choice(X.shape[0], size=k, replace=False)
    centroids = X[init_idx].copy()

    labels = np.zeros(X.shape[0], dtype=np.int64)
    n_iter = 0
    for it in range(50):
        n_iter = it + 1
        dists = np.sum((X[:, None, :] - centroids[None, :, :]) ** 2, axis=-1)
        new_labels = np.argmin(dists, axis=1)
        new_centroids = centroids.copy()
        for j in range(k):
            mask = new_labels == j
            if mask.any():
                new_centroids[j] = X[mask].mean(axis=0)
        shift = np.sqrt(((new_centroids - centroids) ** 2).sum(axis=1)).max()
        centroids = new_centroids
        labels = new_labels
        if shift < 1e-10:
            break

    counts = np.bincount(labels, minlength=k)
    inertia = float(np.sum((X - centroids[labels]) ** 2))
    # canonical ordering of centroids for comparison
    order = np.lexsort((centroids[:, 1], centroids[:, 0]))
    return {
        "centroids": centroids[order],
        "counts": counts[order],
        "labels": labels,
        "inertia": inertia,
        "n_iter": n_iter,
    }
