"""Unchanged runs judged against a baseline recorded from any single one of them.

    python benchmarks/replay_corpus.py [--suite example_suite] [--json OUT] RUN_DIR [RUN_DIR ...]

Each RUN_DIR holds the kept traces of one run of the suite (``--gpuprof-keep-traces``: its
``traces`` folder, or the folder itself).  For each run in turn, a baseline is recorded
from it alone (``--gpuprof-update-baseline --gpuprof-record-processes=1``, replayed), and
every other run is replayed against it with ``--gpuprof``: on unchanged code no test may
fail.  Prints one line per pair and the totals; ``--json`` keeps every replay's results
document.  Run it with the code whose rules are to be judged (an older checkout judges
the same traces by its own rules).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).parent.parent


def traces_of(run: Path) -> Path:
    return run / "traces" if (run / "traces").is_dir() else run


def pytest(suite: str, replay: Path, baselines: Path, *args: str) -> dict:
    """One replay of the suite; its results document."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "results.json"
        subprocess.run([sys.executable, "-m", "pytest", suite, "-p", "no:cacheprovider", "-q",
                        f"--gpuprof-replay={replay}", f"--gpuprof-baseline-dir={baselines}", f"--gpuprof-json={out}",
                        *args], cwd=ROOT, capture_output=True, text=True, check=False)
        if not out.is_file():
            raise SystemExit(f"the replay of {replay} wrote no results")
        return json.loads(out.read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR")
    parser.add_argument("--suite", default="example_suite")
    parser.add_argument("--json", type=Path, help="write every replay's results document here")
    args = parser.parse_args()
    if len(args.runs) < 2:
        parser.error("give two runs or more")
    totals: Counter = Counter()
    kept = []
    for base in args.runs:
        with tempfile.TemporaryDirectory() as tmp:
            baselines = Path(tmp) / "baselines"
            pytest(args.suite, traces_of(base), baselines, "--gpuprof-update-baseline", "--gpuprof-record-processes=1")
            for run in args.runs:
                if run == base:
                    continue
                doc = pytest(args.suite, traces_of(run), baselines, "--gpuprof")
                statuses = Counter(t["status"] for t in doc["tests"])
                totals.update(statuses)
                broken = [f"{t['nodeid'].split('::')[-1]}: " + ", ".join(
                    v["metric"] for v in t["verdicts"] if v["status"] in ("regressed", "changed", "threshold"))
                    for t in doc["tests"] if t["status"] == "failed"]
                print(f"{run.name} against {base.name}: " + ", ".join(f"{n} {s}" for s, n in sorted(statuses.items()))
                      + "".join(f"\n    {b}" for b in broken), flush=True)
                kept.append({"baseline": str(base), "run": str(run), "results": doc})
    print("total: " + ", ".join(f"{n} {s}" for s, n in sorted(totals.items())))
    if args.json:
        args.json.write_text(json.dumps(kept))
    return 1 if totals["failed"] or totals["error"] else 0


if __name__ == "__main__":
    sys.exit(main())
