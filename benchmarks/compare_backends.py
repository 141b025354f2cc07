"""Compare two baseline directories recorded on one GPU with the two backends.

    python benchmarks/compare_backends.py TORCH_BASELINES NSYS_BASELINES
    python benchmarks/compare_backends.py --smoke
        the committed baselines/ against the A/A series' baselines, archived in
        benchmarks/results/ (both torch.profiler, recorded in different sessions).

Prints, per test, every count that differs (it must be none) and the kernel time
per step of each backend with their relative difference.
"""

import argparse
import json
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SMOKE_ARCHIVE = ROOT / "benchmarks/results/gate_aa_h200_2026-11-21.tgz"

COUNTS = ("kernel_count", "memset_count", "sync_count", "step_count") + tuple(
    f"memcpy_{k}_{w}" for k in ("htod", "dtoh", "dtod", "ptop") for w in ("count", "bytes"))


def entries(folder: Path) -> dict:
    out = {}
    for path in sorted(folder.rglob("*.json")):
        for nodeid, by_gpu in json.loads(path.read_text())["tests"].items():
            for gpu, entry in by_gpu.items():
                out[(nodeid, gpu)] = entry
    return out


def compare(torch_dir: Path, nsys_dir: Path) -> int:
    a, b = entries(torch_dir), entries(nsys_dir)
    worst = 0.0
    mismatches = 0
    print(f"{'test':<64} {'counts':<8} {'torch us/step':>14} {'nsys us/step':>14} {'diff':>7}")
    for key in sorted(set(a) & set(b)):
        ta, tb = a[key]["metrics"], b[key]["metrics"]
        bad = [c for c in COUNTS if ta[c] != tb[c]]
        mismatches += len(bad)
        ka, kb = ta["kernel_time_us"] / ta["step_count"], tb["kernel_time_us"] / tb["step_count"]
        diff = (kb - ka) / ka
        worst = max(worst, abs(diff))
        print(f"{key[0]:<64} {'equal' if not bad else ','.join(bad):<8} {ka:>14.3f} {kb:>14.3f} {diff:>+7.2%}")
    for key in sorted(set(a) ^ set(b)):
        print(f"only in {torch_dir if key in a else nsys_dir}: {key[0]}")
    print(f"count mismatches: {mismatches}; largest kernel-time difference: {worst:.2%}")
    return 1 if mismatches or worst > 0.05 else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("torch_dir", type=Path, nargs="?", help="baselines recorded with torch.profiler")
    parser.add_argument("nsys_dir", type=Path, nargs="?", help="baselines recorded with nsys")
    parser.add_argument("--smoke", action="store_true", help="baselines/ against the archived A/A baselines")
    args = parser.parse_args()
    if not args.smoke:
        if args.nsys_dir is None:
            parser.error("TORCH_BASELINES and NSYS_BASELINES are required (or --smoke)")
        return compare(args.torch_dir, args.nsys_dir)
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(SMOKE_ARCHIVE) as tar:
        tar.extractall(tmp, members=[m for m in tar if m.name.startswith("aa/baselines/")], filter="data")
        return compare(ROOT / "baselines", Path(tmp, "aa/baselines"))


if __name__ == "__main__":
    sys.exit(main())
