"""Explicit finite-difference 2-D heat equation with fixed boundaries."""


def run(np):
    nx, ny = 48, 40
    alpha = 1.0
    dx = 1.0 / (nx - 1)
    dy = 1.0 / (ny - 1)
    h = min(dx, dy)
    dt = 0.2 * h * h / alpha
    r = alpha * dt / (h * h)

    x = np.linspace(0.0, 1.0, nx)
    y = np.linspace(0.0, 1.0, ny)
    X, Y = np.meshgrid(x, y, indexing="ij")
    u = np.exp(-((X - 0.5) ** 2 + (Y - 0.5) ** 2) / 0.01)
    # fixed (Dirichlet) boundaries: hot left edge, cold elsewhere
    u[0, :] = 1.0
    u[-1, :] = 0.0
    u[:, 0] = 0.0
    u[:, -1] = 0.0
    u[0, :] = 1.0

    total_heat = []
    for step in range(200):
        u[1:-1, 1:-1] = u[1:-1, 1:-1] + r * (
            u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2]
            - 4.0 * u[1:-1, 1:-1]
        )
        if step % 20 == 0:
            total_heat.append(u[1:-1, 1:-1].sum())

    centre_profile = u[nx // 2, :].copy()
    return {
        "u": u,
        "max_interior": float(u[1:-1, 1:-1].max()),
        "mean_interior": u[1:-1, 1:-1].mean(),
        "total_heat": np.array(total_heat),
        "centre_profile": centre_profile,
        "argmax_interior": int(np.argmax(u[1:-1, 1:-1])),
    }
