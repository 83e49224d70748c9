"""The package's version: the KernelEvo project's, `project(KernelEvo VERSION x.y.z)` in the checkout's
CMakeLists.txt (and `kernelevo --version`). The one place the Python package says it: pyproject.toml
reads it from here, setup.py refuses to build when the two differ, and pyhelper_test checks they agree."""
__version__ = "0.1.0"
