"""Running/rolling statistics of a noisy series with missing values."""


def run(np):
    np.random.seed(17)
    n = 500
    t = np.arange(n, dtype=np.float64)
    series = 10.0 + 0.01 * t + np.sin(t / 15.0) + 0.5 * np.random.randn(n)
    missing = np.random.rand(n) < 0.05
    series[missing] = np.nan

    valid = ~np.isnan(series)
    filled = np.where(valid, series, 0.0)
    csum = np.cumsum(filled)
    csum2 = np.cumsum(filled ** 2)
    ccount = np.cumsum(valid)
    running_mean = csum / ccount
    running_var = csum2 / ccount - running_mean ** 2
    running_std = np.sqrt(np.maximum(running_var, 0.0))

    # rolling mean over a window using cumulative-sum differences
    win = 20
    cs = np.concatenate([[0.0], csum])
    cc = np.concatenate([[0], ccount])
    roll_sum = cs[win:] - cs[:-win]
    roll_cnt = cc[win:] - cc[:-win]
    roll_mean = roll_sum / roll_cnt

    # z-scores and outliers, NaN-aware reductions
    mu = np.nanmean(series)
    sd = np.nanstd(series)
    z = (series - mu) / sd
    outliers = np.abs(np.nan_to_num(z, nan=0.0)) > 2.0

    # forward-fill missing values
    idx = np.where(valid, np.arange(n), 0)
    np.maximum.accumulate(idx, out=idx)
    ffilled = series[idx]

    blocks = series.reshape(25, 20)
    return {
        "running_mean": running_mean,
        "running_std": running_std,
        "roll_mean": roll_mean,
        "nanmean": mu,
        "nanstd": sd,
        "nanmax": np.nanmax(series),
        "n_missing": int(missing.sum()),
        "outliers": outliers,
        "ffilled": ffilled,
        "block_nanmean": np.nanmean(blocks, axis=1),
        "block_nanmedian": np.nanmedian(blocks, axis=1),
        "diff_mean": float(np.nanmean(np.diff(series))),
    }
