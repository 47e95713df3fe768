"""Builds the optional C recorder (lazynp/_base/_speedups.pyx); everything else is in pyproject.toml.

Without a C compiler the extension is skipped and lazynp runs its pure Python recorder.
"""
from setuptools import Extension, setup

try:
    import numpy
    from Cython.Build import cythonize
    extensions = cythonize([Extension("lazynp._base._speedups", ["lazynp/_base/_speedups.pyx"],
                                      include_dirs=[numpy.get_include()],
                                      define_macros=[("NPY_NO_DEPRECATED_API",
                                                      "NPY_2_0_API_VERSION"),
                                                     ("NPY_TARGET_VERSION",
                                                      "NPY_2_0_API_VERSION")],
                                      optional=True)],
                           compiler_directives={"language_level": 3})
    for extension in extensions:
        # cythonize() returns new Extension objects without ``optional``: without this, a
        # machine with no working C compiler fails to install instead of running pure Python
        extension.optional = True
except ImportError:         # no Cython (or NumPy) at build time: pure Python recorder
    extensions = []

setup(ext_modules=extensions)
