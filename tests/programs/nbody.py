"""Gravitational n-body simulation with leapfrog (kick-drift-kick) steps."""


def accelerations(np, pos, mass, G, soft):
    diff = pos[None, :, :] - pos[:, None, :]          # (n, n, 3): r_j - r_i
    dist2 = np.sum(diff ** 2, axis=-1) + soft ** 2     # (n, n)
    inv_d3 = dist2 ** -1.5
    np.fill_diagonal(inv_d3, 0.0)
    return G * np.einsum("ij,ijk,j->ik", inv_d3, diff, mass)


def energy(np, pos, vel, mass, G, soft):
    ke = 0.5 * np.sum(mass * np.sum(vel ** 2, axis=1))
    diff = pos[:, None, :] - pos[None, :, :]
    dist = np.sqrt(np.sum(diff ** 2, axis=-1) + soft ** 2)
    iu = np.triu_indices(pos.shape[0], k=1)
    pe = -G * np.sum((mass[:, None] * mass[None, :] / dist)[iu])
    return ke + pe


def run(np):
    np.random.seed(3)
    n = 24
    G, soft, dt = 1.0, 0.1, 0.005
    pos = np.random.randn(n, 3)
    vel = 0.2 * np.random.randn(n, 3)
    mass = 20.0 * np.ones(n) / n
    # move into centre-of-mass frame
    vel -= np.mean(mass[:, None] * vel, axis=0) / np.mean(mass)

    e0 = energy(np, pos, vel, mass, G, soft)
    acc = accelerations(np, pos, mass, G, soft)
    for step in range(40):
        vel += 0.5 * dt * acc
        pos += dt * vel
        acc = accelerations(np, pos, mass, G, soft)
        vel += 0.5 * dt * acc
    e1 = energy(np, pos, vel, mass, G, soft)

    momentum = np.sum(mass[:, None] * vel, axis=0)
    return {
        "pos": pos,
        "vel": vel,
        "e0": e0,
        "e1": e1,
        "energy_drift_small": bool(abs((e1 - e0) / e0) < 1e-3),
        "momentum": momentum,
        "com": (mass[:, None] * pos).sum(axis=0) / mass.sum(),
    }
