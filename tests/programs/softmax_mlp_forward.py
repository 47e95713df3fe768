"""Two-layer MLP forward pass with ReLU, stable softmax and cross-entropy."""


def softmax(np, logits):
    shifted = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=1, keepdims=True)


def run(np):
    rng = np.random.default_rng(123)
    batch, d_in, d_hidden, n_classes = 64, 20, 32, 5
    X = rng.standard_normal((batch, d_in))
    y = rng.integers(0, n_classes, size=batch)

    # He initialisation
    W1 = rng.standard_normal((d_in, d_hidden)) * np.sqrt(2.0 / d_in)
    b1 = np.zeros(d_hidden)
    W2 = rng.standard_normal((d_hidden, n_classes)) * np.sqrt(2.0 / d_hidden)
    b2 = np.full(n_classes, 0.01)

    h_pre = X @ W1 + b1
    h = np.maximum(h_pre, 0)
    logits = h @ W2 + b2
    probs = softmax(np, logits)

    # cross-entropy via log-sum-exp
    m = logits.max(axis=1, keepdims=True)
    lse = m[:, 0] + np.log(np.exp(logits - m).sum(axis=1))
    nll = lse - logits[np.arange(batch), y]
    loss = nll.mean()

    # one-hot and backward to the output layer
    onehot = np.zeros((batch, n_classes))
    onehot[np.arange(batch), y] = 1.0
    dlogits = (probs - onehot) / batch
    dW2 = h.T @ dlogits
    db2 = dlogits.sum(axis=0)

    pred = np.argmax(probs, axis=1)
    return {
        "probs": probs,
        "loss": float(loss),
        "pred": pred,
        "accuracy": float((pred == y).mean()),
        "dead_units": int(np.sum(np.all(h == 0, axis=0))),
        "dW2": dW2,
        "db2": db2,
        "probs_sum_to_one": bool(np.allclose(probs.sum(axis=1), 1.0)),
        "confidence": np.take_along_axis(probs, pred[:, None], axis=1).ravel(),
    }
