"""Builds the kernelevo package (pyproject.toml holds the metadata). The package's version is the CMake
project's (../CMakeLists.txt), and the build copies what the helper runs from the source tree into
kernelevo/_share, the one source staying where it is:
  tool/kernelbench/jit_reference.cpp, tool/task/precision.h
      -> kernelevo/_share/kernelbench/ (export_task's reference and policy table; the importer's code is
         the package's own kernelevo.kernelbench)
  runtime/include/kernelevo/abi.h -> kernelevo/_share/include/kernelevo/ (load_op's binding includes it)
"""
import os
import re
import shutil

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
    with open(_source("CMakeLists.txt"), encoding="utf-8") as f:
        m = re.search(r"project\(KernelEvo\s+VERSION\s+([0-9.]+)", f.read())
    if not m:
        raise SystemExit("kernelevo: no 'project(KernelEvo VERSION x.y.z' in %s" % os.path.join(ROOT, "CMakeLists.txt"))
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


setup(version=_version(), cmdclass={"build_py": BuildWithShare})
