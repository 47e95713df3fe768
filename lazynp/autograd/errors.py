"""The errors of lazynp's autodiff (the bottom of the package: every module may raise them)."""
from __future__ import annotations


class AutogradError(RuntimeError):
    """A value on the differentiated path cannot be differentiated."""


class NoGradientRule(AutogradError, NotImplementedError):
    """An operation on the differentiated path has no gradient rule (the message names it)."""


class TracedValueError(AutogradError, TypeError):
    """A differentiated value was turned into a Python/NumPy value (``float(x)``,
    ``x.item()``...): a computation on it would carry no gradient (autograd raises
    ``TypeError`` here, JAX ``ConcretizationTypeError``, a ``TypeError`` too)."""


def _spelled(name: str) -> str:
    """How the user wrote the call that took the value: ``float(x)``, ``x.item()``."""
    if name in ("float", "int", "complex", "operator.index"):
        return f"{name}(x)"
    return f"x.{name}()"


def traced_value_error(name: str) -> TracedValueError:
    """The error of :meth:`_Watcher.value_taken` for the call ``name``."""
    return TracedValueError(
        f"lazynp.autograd: {_spelled(name)} of a value that depends on a differentiated "
        f"input would carry no gradient (the result is a constant to Python, so a gradient "
        f"through it would be silently wrong). To keep the gradient, compute with lazynp "
        f"functions (lazynp.exp(x) rather than math.exp(float(x)); comparisons and bool() "
        f"work for control flow); to cut it on purpose, use lazynp.stop_gradient(x) and "
        f"take the value of that")


class PhaseDependentGradient(AutogradError):
    """The differentiated function depends on the phases (or signs) of eigenvectors or
    singular vectors, which the decomposition leaves arbitrary: it has no gradient."""


class ChunkedClosure(NotImplementedError):
    """The function of CPU arguments returned a chunked (dask) array: it reads chunked data
    from a closure.  The transform catches it and takes the chunked path
    (:mod:`lazynp.autograd.dask_grad`, ``dask_forward``) with the data's ``client``."""

    def __init__(self, who: str, client):
        super().__init__(
            f"{who}: the function returned a chunked (dask) array, but no differentiated "
            f"argument is chunked: chunked data it reads from outside (a closure or a "
            f"global) inside another transform cannot be followed; pass the chunked data "
            f"as an argument ({who}(f)(w, x) with f(w, x))")
        self.client = client
