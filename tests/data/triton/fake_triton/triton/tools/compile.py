# Stand-in for `python -m triton.tools.compile` (Triton 3.6's command line): checks the arguments
# and executes the candidate file the way the real one does (so its module-level code runs, as it
# would with Triton: the sandbox tests rely on it), then copies the recorded output for that exact
# signature (the file names carry the same signature hash and suffix as Triton's) to --out-path.
# The recorded files are found on the import path (tests/data/triton/aot is put there, read-only
# inside the compile sandbox) or next to this package.
import hashlib
import importlib.util
import shutil
import sys
from argparse import ArgumentParser
from pathlib import Path

def recorded_dir():
    for p in sys.path:
        if p and (Path(p) / "README.md").exists() and Path(p).name == "aot":
            return Path(p)
    return Path(__file__).resolve().parents[3] / "aot"


def main():
    parser = ArgumentParser(description="Triton ahead-of-time compiler (recorded stand-in)")
    parser.add_argument("path")
    parser.add_argument("--kernel-name", "-n", type=str, default="", required=True)
    parser.add_argument("--target", "-t", type=str, default=None)
    parser.add_argument("--num-warps", "-w", type=int, default=1)
    parser.add_argument("--num-stages", "-ns", type=int, default=3)
    parser.add_argument("--out-name", "-on", type=str, default=None)
    parser.add_argument("--out-path", "-o", type=Path, default=None)
    parser.add_argument("--signature", "-s", type=str, required=True)
    parser.add_argument("--grid", "-g", type=str, required=True)
    args = parser.parse_args()
    arg_path = Path(args.path)
    sys.path.insert(0, str(arg_path.parent))
    spec = importlib.util.spec_from_file_location(arg_path.stem, arg_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # the candidate's module-level code runs here, as with Triton
    if not hasattr(mod, args.kernel_name):
        raise AttributeError(f"module '{arg_path.stem}' has no attribute '{args.kernel_name}'")
    # Triton 3.6's three uses of the driver, kept so that the tool's way around them is tested here:
    # JITFunction.create_binder asks the active driver for the target even with --target; --target's
    # architecture stays a string, which the NVIDIA backend compares with an int; the C types of the
    # arguments come from the active driver.
    from triton.runtime.driver import driver
    from triton.backends.compiler import GPUTarget
    driver.active.get_current_target()
    target = GPUTarget(*args.target.split(":")) if args.target else driver.active.get_current_target()
    if target.arch >= 100:  # a TypeError for a string architecture, as in Triton 3.6
        pass
    ty_to_cpp = driver.active.map_python_to_cpp_type
    for s in args.signature.split(","):
        s = s.strip(" ").split(":")[0]
        if not s[0].isdigit():
            ty_to_cpp(s)
    RECORDED = recorded_dir()
    assert len(args.grid.split(",")) == 3
    sig = [s.strip(" ") for s in args.signature.split(",")]
    meta = f"warps{args.num_warps}xstages{args.num_stages}"
    h = hashlib.sha256(" ".join(sig + [meta]).encode()).hexdigest()[:8]
    suffix = ""
    for i, s in enumerate(sig):
        suffix += str(i)
        if ":" in s and s.split(":")[1] == "16":
            suffix += "d"
    out_path = args.out_path if args.out_path else Path(args.out_name)
    found = False
    for ext in ("c", "h"):
        rec = RECORDED / f"{out_path.name}.{h}_{suffix}.{ext}"
        if rec.exists():
            shutil.copy(rec, out_path.with_suffix(f".{h}_{suffix}.{ext}"))
            found = True
    if not found:
        print(f"no recorded AOT output for {out_path.name} signature '{args.signature}' {meta} (want {out_path.name}.{h}_{suffix}.c)",
              file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
