"""2-D convolution via sliding_window_view + einsum / tensordot."""


def conv2d(np, img, kernel, mode="same"):
    kh, kw = kernel.shape
    if mode == "same":
        ph, pw = kh // 2, kw // 2
        img = np.pad(img, ((ph, ph), (pw, pw)), mode="constant")
    windows = np.lib.stride_tricks.sliding_window_view(img, (kh, kw))
    # true convolution: flip the kernel
    return np.einsum("ijkl,kl->ij", windows, kernel[::-1, ::-1])


def run(np):
    np.random.seed(11)
    img = np.random.rand(32, 40)
    gauss1d = np.exp(-0.5 * (np.arange(-2, 3) / 1.0) ** 2)
    gauss1d /= gauss1d.sum()
    gauss = np.outer(gauss1d, gauss1d)
    sobel_x = np.array([[1.0, 0.0, -1.0], [2.0, 0.0, -2.0], [1.0, 0.0, -1.0]])

    blurred = conv2d(np, img, gauss, mode="same")
    gx = conv2d(np, blurred, sobel_x, mode="same")
    gy = conv2d(np, blurred, sobel_x.T, mode="same")
    mag = np.hypot(gx, gy)

    # multi-channel valid convolution with tensordot
    chans = np.stack([img, blurred, mag], axis=-1)           # (H, W, C)
    bank = np.random.randn(3, 3, 3, 4)                        # (kh, kw, C, F)
    padded = np.pad(chans, ((1, 1), (1, 1), (0, 0)), mode="reflect")
    win = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(0, 1))
    # win: (H, W, C, 3, 3)
    feat = np.tensordot(win, bank, axes=([3, 4, 2], [0, 1, 2]))  # (H, W, F)
    relu = np.maximum(feat, 0.0)

    return {
        "blurred": blurred,
        "grad_mag": mag,
        "features": relu,
        "feature_means": relu.mean(axis=(0, 1)),
        "edge_fraction": float((mag > mag.mean() + mag.std()).mean()),
        "blur_sum": blurred.sum(),
    }
