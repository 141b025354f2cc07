"""Compare two baseline directories recorded on one GPU with the two backends.

    python benchmarks/compare_backends.py TORCH_BASELINES NSYS_BASELINES

Prints, per test, every count that differs (it must be none) and the kernel time
per step of each backend with their relative difference.
"""

import json
import sys
from pathlib import Path

COUNTS = ("kernel_count", "memset_count", "sync_count", "step_count") + tuple(
    f"memcpy_{k}_{w}" for k in ("htod", "dtoh", "dtod", "ptop") for w in ("count", "bytes"))


def entries(folder: Path) -> dict:
    out = {}
    for path in sorted(folder.rglob("*.json")):
        for nodeid, by_gpu in json.loads(path.read_text())["tests"].items():
            for gpu, entry in by_gpu.items():
                out[(nodeid, gpu)] = entry
    return out


def main(torch_dir: str, nsys_dir: str) -> int:
    a, b = entries(Path(torch_dir)), entries(Path(nsys_dir))
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
    print(f"count mismatches: {mismatches}; largest kernel-time difference: {worst:.2%}")
    return 1 if mismatches or worst > 0.05 else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
