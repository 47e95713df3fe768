"""Histogram equalization of a synthetic low-contrast 8-bit image."""


def run(np):
    np.random.seed(21)
    h, w = 64, 96
    yy, xx = np.mgrid[0:h, 0:w]
    base = 80 + 30 * np.sin(xx / 9.0) * np.cos(yy / 7.0) + 5 * np.random.randn(h, w)
    img = np.clip(np.round(base), 0, 255).astype(np.uint8)

    hist = np.bincount(img.ravel(), minlength=256)
    hist2, edges = np.histogram(img, bins=256, range=(0, 256))
    cdf = np.cumsum(hist)
    cdf_min = cdf[np.nonzero(cdf)[0][0]]
    lut = np.round((cdf - cdf_min) / (img.size - cdf_min) * 255.0)
    lut = np.clip(lut, 0, 255).astype(np.uint8)
    eq = lut[img]

    eq_hist = np.bincount(eq.ravel(), minlength=256)
    eq_cdf = np.cumsum(eq_hist) / eq.size
    return {
        "img": img,
        "hist": hist,
        "hist_matches": bool(np.array_equal(hist, hist2)),
        "edges": edges,
        "lut": lut,
        "equalized": eq,
        "eq_cdf": eq_cdf,
        "contrast_before": int(img.max()) - int(img.min()),
        "contrast_after": int(eq.max()) - int(eq.min()),
        "eq_mean": eq.mean(),
        "eq_std": eq.astype(np.float64).std(),
    }
