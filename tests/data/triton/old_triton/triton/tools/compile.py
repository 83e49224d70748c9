from argparse import ArgumentParser

if __name__ == "__main__":
    parser = ArgumentParser(description="Triton ahead-of-time compiler (old stand-in)")
    parser.add_argument("path")
    parser.add_argument("--kernel-name", "-n", type=str, required=True)
    parser.add_argument("--signature", "-s", type=str, required=True)
    parser.add_argument("--out-name", "-on", type=str, default=None)
    parser.add_argument("--out-path", "-o", type=str, default=None)
    parser.add_argument("--num-warps", "-w", type=int, default=1)
    parser.add_argument("--num-stages", "-ns", type=int, default=3)
    parser.parse_args()
