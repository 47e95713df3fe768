"""Reverse-mode autodiff over lazynp's recorded graph.

Functional API (autograd/JAX style): :func:`grad`, :func:`value_and_grad`, :func:`vjp`,
:func:`jvp`, :func:`jacobian`, :func:`hessian`, :func:`elementwise_grad`; arguments and
outputs may be pytrees (tuples, lists, dicts).  Imperative API (MXNet style):
``x.attach_grad()``, ``with lazynp.autograd.record(): ...``, ``y.backward()``, ``x.grad``,
``lazynp.autograd.pause()``.

The package, bottom to top:

* :mod:`~lazynp.autograd.rules`: the gradient rules (one VJP per op, written with lazynp
  ops, so gradients are lazy graphs that fuse, run on the engine and can be differentiated
  again: ``grad(grad(f))``, :func:`hessian`);
* :mod:`~lazynp.autograd.tape`: the tape (an open trace watches the recorder and NumPy's
  fallbacks) and the backward pass over it; :class:`AutogradError`;
* :mod:`~lazynp.autograd.replay`: compiled plans for forward graphs of a structure seen
  before;
* :mod:`~lazynp.autograd.custom`: functions with their own rule (:func:`custom_vjp`,
  :func:`custom_jvp`, :func:`primitive` + :func:`defvjp`);
* :mod:`~lazynp.autograd.api`: the functional and imperative API;
* :mod:`~lazynp.autograd.device`: ``grad`` of functions of device arrays;
* :mod:`~lazynp.autograd.misc`: autograd's ``flatten`` (a pytree to one vector and back)
  and ``const_graph``.

Writes (``a[i] = v``, ``a += b``, ``out=``, ``np.add.at``, writes through views) are new
versions of a Var: their rules treat them functionally (the old version gets the cotangent
with the written region zeroed, the written value gets the region's cotangent).
"""
from __future__ import annotations

from .tape import AutogradError, NoGradientRule, TracedValueError, stop_gradient  # noqa: F401
from .api import (grad, value_and_grad, vjp, jvp, jacobian, hessian, elementwise_grad,
                  record, pause, backward, is_recording, is_training, mark_variables,
                  hessian_vector_product, hessian_tensor_product, tensor_jacobian_product,
                  vector_jacobian_product, make_vjp, make_jvp, make_hvp)  # noqa: F401
from .custom import custom_vjp, custom_jvp, primitive, defvjp
from . import misc  # noqa: F401  (lazynp.autograd.misc.flatten after import lazynp)

__all__ = ["grad", "value_and_grad", "vjp", "jvp", "jacobian", "hessian", "elementwise_grad",
           "record", "pause", "backward", "is_recording", "stop_gradient", "AutogradError",
           "TracedValueError",
           "mark_variables", "hessian_vector_product", "hessian_tensor_product",
           "tensor_jacobian_product", "vector_jacobian_product", "make_vjp", "make_jvp",
           "make_hvp", "custom_vjp", "custom_jvp", "primitive", "defvjp"]

