"""Builds the kernelevo package (pyproject.toml holds the metadata). The package's version is the CMake
project's (../CMakeLists.txt), written in kernelevo/_version.py and checked here, and the build copies
what the helper runs from the source tree into kernelevo/_share, the one source staying where it is:
  tool/kernelbench/jit_reference.cpp, tool/task/precision.h
      -> kernelevo/_share/kernelbench/ (export_task's reference and policy table; the importer's code is
         the package's own kernelevo.kernelbench)
  runtime/include/kernelevo/abi.h -> kernelevo/_share/include/kernelevo/ (load_op's binding includes it)
"""
import atexit
import os
import re
import shutil
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SHARED = {
    "kernelbench": ["tool/kernelbench/jit_reference.cpp", "tool/task/precision.h"],
    "include/kernelevo": ["runtime/include/kernelevo/abi.h"],
}


def _source(rel):
    path = os.path.join(ROOT, rel)
    if not os.path.isfile(path):
        raise SystemExit("kernelevo: %s not found: build the package from a KernelEvo checkout "
                         "(pip install ./python from its root)" % path)
    return path


def _version():
    """The CMake project's version, which must be kernelevo/_version.py's (pyproject.toml reads that one)."""
    with open(_source("CMakeLists.txt"), encoding="utf-8") as f:
        m = re.search(r"project\(KernelEvo\s+VERSION\s+([0-9.]+)", f.read())
    if not m:
        raise SystemExit("kernelevo: no 'project(KernelEvo VERSION x.y.z' in %s" % os.path.join(ROOT, "CMakeLists.txt"))
    with open(os.path.join(HERE, "kernelevo", "_version.py"), encoding="utf-8") as f:
        package = re.search(r'^__version__ = "([^"]+)"', f.read(), re.M)
    if not package or package.group(1) != m.group(1):
        raise SystemExit("kernelevo: kernelevo/_version.py says %s, CMakeLists.txt's project says %s: make them "
                         "the same" % (package.group(1) if package else "nothing", m.group(1)))
    return m.group(1)


class BuildWithShare(build_py):
    """build_py, plus the source tree's files under kernelevo/_share in the built package."""

    def run(self):
        super().run()
        for folder, files in SHARED.items():
            dest = os.path.join(self.build_lib, "kernelevo", "_share", folder)
            os.makedirs(dest, exist_ok=True)
            for rel in files:
                shutil.copyfile(_source(rel), os.path.join(dest, os.path.basename(rel)))


def _scratch():
    """A private folder for the build's intermediate files (build/, kernelevo.egg-info), removed when
    the build ends: `pip install ./python` leaves the checkout as it was."""
    d = tempfile.mkdtemp(prefix="kernelevo-build-")
    atexit.register(shutil.rmtree, d, True)
    return d


_version()  # (a mismatch stops the build)
SCRATCH = _scratch()
setup(cmdclass={"build_py": BuildWithShare},
      options={"build": {"build_base": os.path.join(SCRATCH, "build")}, "egg_info": {"egg_base": SCRATCH}})
