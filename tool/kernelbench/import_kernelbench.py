#!/usr/bin/env python3
"""Turns KernelBench problem files into kernelevo task directories (driven by `kernelevo import
kernelbench`; it needs PyTorch, validation later needs no Python).

The entry script only: it parses the arguments, finds the kernelevo Python package and runs its
importer (python/kernelevo/kernelbench/: what it does, module by module). It passes its own print
to it: `kernelevo import kernelbench` runs this script through a wrapper that gives only this
script's print the protocol's stdout (results, progress lines, a fatal error), so that nothing a
problem prints can be taken for them.
"""
import argparse
import json
import os
import sys


def package_dir(given):
    """The folder holding the kernelevo Python package: --kernelevo-python as the tool passes it, else
    the installed share/kernelevo/python beside this share/kernelevo/kernelbench, else the source
    tree's python/. None when none holds it."""
    here = os.path.dirname(os.path.abspath(__file__))
    for c in (given, os.path.join(here, "..", "python"), os.path.join(here, "..", "..", "python")):
        if c and os.path.isfile(os.path.join(c, "kernelevo", "kernelbench", "driver.py")):
            return os.path.abspath(c)
    return None


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="where OUT/NAME/ is written (kernelevo: the problem's private folder)")
    ap.add_argument("--reference-source", required=True, help="the suite's copy of jit_reference.cpp")
    ap.add_argument("--device", default="cpu", help="torch device to build and run the model on (cpu, cuda)")
    ap.add_argument("--refcheck", default="", help="kernelevo-refcheck executable (empty: skip the C++ check)")
    ap.add_argument("--library", default="", help="the built generic reference library")
    ap.add_argument("--max-numel", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=900, help="seconds per problem")
    ap.add_argument("--scratch", default="")
    ap.add_argument("--precision", default=None,
                    help="the tasks' precision policy as JSON: {task: its task.json form or null, policy, cudnn_tf32, matmul_tf32}")
    ap.add_argument("--regions", action="store_true",
                    help="import each problem as a whole model: a model folder of regions (kernelevo.export_model)")
    ap.add_argument("--turns", default="",
                    help="the folder where the tool serves the GPU lock's turns (common.GpuTurns; empty: none asked)")
    ap.add_argument("--kernelevo-python", default="", help="the folder holding the kernelevo Python package")
    ap.add_argument("files", nargs="+")
    return ap.parse_args()


def main():
    args = parse_args()
    found = package_dir(args.kernelevo_python)
    if found is None:
        print(json.dumps({"fatal": "the kernelevo Python package (kernelevo/kernelbench/driver.py) was not found %s" % (
            "in " + args.kernelevo_python if args.kernelevo_python else "beside the importer (%s): reinstall kernelevo" %
            os.path.dirname(os.path.abspath(__file__)))}), flush=True)
        return 2
    sys.path.insert(0, found)
    from kernelevo.kernelbench.driver import run
    return run(args, print)


if __name__ == "__main__":
    sys.exit(main())
