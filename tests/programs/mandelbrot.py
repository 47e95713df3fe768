"""Mandelbrot escape-time iteration counts on a complex grid."""


def run(np):
    w, h = 120, 80
    max_iter = 40
    re = np.linspace(-2.2, 0.8, w)
    im = np.linspace(-1.2, 1.2, h)
    R, I = np.meshgrid(re, im)
    c = R + 1j * I

    z = np.zeros_like(c)
    counts = np.zeros(c.shape, dtype=np.int32)
    escaped_at = np.full(c.shape, max_iter, dtype=np.int64)
    for it in range(max_iter):
        mask = np.abs(z) <= 2.0
        z[mask] = z[mask] ** 2 + c[mask]
        counts[mask] += 1
        newly = (np.abs(z) > 2.0) & (escaped_at == max_iter)
        escaped_at[newly] = it

    inside = counts == max_iter
    area = inside.sum() * (re[1] - re[0]) * (im[1] - im[0])
    hist = np.bincount(counts.ravel(), minlength=max_iter + 1)
    return {
        "counts": counts,
        "escaped_at": escaped_at,
        "inside": inside,
        "area_estimate": float(area),
        "hist": hist,
        "final_z_inside": z[inside],
        "row_means": counts.mean(axis=1),
    }
