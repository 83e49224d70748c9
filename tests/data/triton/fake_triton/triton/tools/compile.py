# Stand-in for `python -m triton.tools.compile` (Triton 3.6's command line): checks the arguments
# the way the real one does, then copies the recorded output for that exact signature (the file
# names carry the same signature hash and suffix as Triton's) to --out-path.
import hashlib
import shutil
import sys
from argparse import ArgumentParser
from pathlib import Path

RECORDED = Path(__file__).resolve().parents[3] / "aot"


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
    src = Path(args.path).read_text()
    if f"def {args.kernel_name}(" not in src:
        raise AttributeError(f"module 'kernel' has no attribute '{args.kernel_name}'")
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
