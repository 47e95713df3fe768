"""Logistic regression trained by batch gradient descent."""


def sigmoid(np, z):
    return 1.0 / (1.0 + np.exp(-z))


def run(np):
    np.random.seed(7)
    n, d = 300, 5
    X = np.random.randn(n, d)
    w_true = np.array([1.5, -2.0, 0.5, 0.0, 3.0])
    logits = X @ w_true + 0.3
    y = (np.random.rand(n) < sigmoid(np, logits)).astype(np.float64)

    # standardize features and add bias column
    mu = X.mean(axis=0, keepdims=True)
    sd = X.std(axis=0, keepdims=True)
    Xs = (X - mu) / sd
    Xb = np.hstack([np.ones((n, 1)), Xs])

    w = np.zeros(d + 1)
    lr = 0.5
    eps = 1e-12
    losses = []
    for epoch in range(150):
        p = sigmoid(np, Xb @ w)
        pc = np.clip(p, eps, 1 - eps)
        loss = -np.mean(y * np.log(pc) + (1 - y) * np.log(1 - pc))
        losses.append(loss)
        grad = Xb.T @ (p - y) / n
        w -= lr * grad

    p = sigmoid(np, Xb @ w)
    pred = p >= 0.5
    acc = np.mean(pred == (y == 1))
    return {
        "w": w,
        "losses": np.array(losses),
        "final_loss": float(losses[-1]),
        "accuracy": float(acc),
        "pred": pred,
        "n_positive": int(np.count_nonzero(pred)),
    }
