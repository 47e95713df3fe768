"""Optimizers whose updates run on the KVStore servers (after MXNet's ``mx.optimizer``).

An optimizer is a small picklable object: it is sent to every server by
``KVStore.set_optimizer`` and applied there, per key (and per slice of a key split across
servers: every update is elementwise, so slices update independently).  Updates are
functional: they return new arrays and never write into the weight or the gradient, because
a server may still be sending the old weight to a worker while the next update runs.
"""
from __future__ import annotations

import importlib
import math
from typing import Any

import numpy as np

__all__ = ["Optimizer", "SGD", "Adam", "from_config"]


class Optimizer:
    """Base class: ``create_state`` and ``update``; ``config`` describes it for checkpoints.

    Parameters
    ----------
    learning_rate : float
        Step size.
    wd : float
        Weight decay (L2 penalty ``wd * weight`` added to the gradient).
    rescale_grad : float
        The pushed gradient is multiplied by this first (e.g. ``1 / num_workers`` when each
        worker pushes the mean gradient of its shard).
    """

    def __init__(self, learning_rate: float = 0.01, wd: float = 0.0,
                 rescale_grad: float = 1.0) -> None:
        self.learning_rate = float(learning_rate)
        self.wd = float(wd)
        self.rescale_grad = float(rescale_grad)

    def _params(self) -> dict[str, Any]:
        return {"learning_rate": self.learning_rate, "wd": self.wd,
                "rescale_grad": self.rescale_grad}

    def config(self) -> dict[str, Any]:
        """``{"class": "module:Name", "params": {...}}``, JSON-serializable."""
        cls = type(self)
        return {"class": f"{cls.__module__}:{cls.__qualname__}", "params": self._params()}

    def create_state(self, weight: np.ndarray) -> dict[str, np.ndarray]:
        """Fresh optimizer state for ``weight`` (arrays only: 0-d arrays for counters)."""
        return {}

    def update(self, weight: np.ndarray, grad: np.ndarray,
               state: dict[str, np.ndarray]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Return ``(new_weight, new_state)``; must not modify its arguments."""
        raise NotImplementedError

    def _grad(self, weight: np.ndarray, grad: np.ndarray) -> np.ndarray:
        g = grad * self.rescale_grad if self.rescale_grad != 1.0 else grad
        if self.wd:
            g = g + self.wd * weight
        return g

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.config() == self.config()

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._params().items())
        return f"{type(self).__name__}({args})"


class SGD(Optimizer):
    """Stochastic gradient descent with momentum and weight decay (MXNet's update rule).

    ``g = rescale_grad * grad + wd * weight``; without momentum ``weight -= learning_rate *
    g``; with momentum ``mom = momentum * mom - learning_rate * g; weight += mom``.
    """

    def __init__(self, learning_rate: float = 0.01, momentum: float = 0.0, wd: float = 0.0,
                 rescale_grad: float = 1.0) -> None:
        super().__init__(learning_rate, wd, rescale_grad)
        self.momentum = float(momentum)

    def _params(self) -> dict[str, Any]:
        return {**super()._params(), "momentum": self.momentum}

    def create_state(self, weight: np.ndarray) -> dict[str, np.ndarray]:
        return {"mom": np.zeros_like(weight)} if self.momentum else {}

    def update(self, weight, grad, state):
        g = self._grad(weight, grad)
        if not self.momentum:
            return weight - self.learning_rate * g, state
        mom = self.momentum * state["mom"] - self.learning_rate * g
        return weight + mom, {"mom": mom}


class Adam(Optimizer):
    """Adam (Kingma & Ba), with MXNet's bias correction folded into the step size.

    ``t += 1; g = rescale_grad * grad + wd * weight; m = beta1 m + (1 - beta1) g;
    v = beta2 v + (1 - beta2) g**2; weight -= lr * sqrt(1 - beta2**t) / (1 - beta1**t) *
    m / (sqrt(v) + epsilon)``.
    """

    def __init__(self, learning_rate: float = 0.001, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-8, wd: float = 0.0, rescale_grad: float = 1.0) -> None:
        super().__init__(learning_rate, wd, rescale_grad)
        self.beta1 = float(beta1)
        self.beta2 = float(beta2)
        self.epsilon = float(epsilon)

    def _params(self) -> dict[str, Any]:
        return {**super()._params(), "beta1": self.beta1, "beta2": self.beta2,
                "epsilon": self.epsilon}

    def create_state(self, weight):
        return {"m": np.zeros_like(weight), "v": np.zeros_like(weight),
                "t": np.array(0, dtype=np.int64)}

    def update(self, weight, grad, state):
        t = int(state["t"]) + 1
        g = self._grad(weight, grad)
        m = self.beta1 * state["m"] + (1.0 - self.beta1) * g
        v = self.beta2 * state["v"] + (1.0 - self.beta2) * (g * g)
        lr_t = self.learning_rate * math.sqrt(1.0 - self.beta2 ** t) / (1.0 - self.beta1 ** t)
        new = weight - lr_t * m / (np.sqrt(v) + self.epsilon)
        return new, {"m": m, "v": v, "t": np.array(t, dtype=np.int64)}


def from_config(config: dict[str, Any] | None) -> Optimizer | None:
    """Rebuild an optimizer from :meth:`Optimizer.config` (``None`` gives ``None``)."""
    if config is None:
        return None
    module, _, name = config["class"].partition(":")
    cls = getattr(importlib.import_module(module), name)
    if not (isinstance(cls, type) and issubclass(cls, Optimizer)):
        raise TypeError(f"{config['class']} is not a lazynp.kvstore optimizer")
    return cls(**config["params"])
