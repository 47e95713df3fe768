"""PageRank by power iteration on a random directed graph."""


def run(np):
    rng = np.random.default_rng(2024)
    n = 40
    adj = (rng.random((n, n)) < 0.1).astype(np.float64)
    np.fill_diagonal(adj, 0.0)
    adj[5, :] = 0.0  # a dangling node

    out_deg = adj.sum(axis=1)
    dangling = out_deg == 0
    safe_deg = np.where(dangling, 1.0, out_deg)
    P = adj / safe_deg[:, None]           # row-stochastic except dangling rows
    P[dangling] = 1.0 / n

    d = 0.85
    r = np.full(n, 1.0 / n)
    deltas = []
    for it in range(200):
        r_new = (1 - d) / n + d * (P.T @ r)
        delta = np.abs(r_new - r).sum()
        deltas.append(delta)
        r = r_new
        if delta < 1e-12:
            break

    ranking = np.argsort(-r, kind="stable")
    top5 = ranking[:5]
    in_deg = adj.sum(axis=0)
    return {
        "rank": r,
        "iterations": len(deltas),
        "deltas": np.array(deltas),
        "top5": top5,
        "sums_to_one": bool(np.isclose(r.sum(), 1.0)),
        "in_degree_of_top": in_deg[top5],
        "corr_with_indegree": float(np.corrcoef(r, in_deg)[0, 1]),
    }
