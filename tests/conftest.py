"""Shared test configuration: pytester drives pytest runs of small test suites; under
pytest-xdist each worker takes a group of the GPUs of its own (tests/gpu/test_gpu.py)."""

import contextlib
import fcntl
import gc
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from pytest_gpuprof.run import gpus

pytest_plugins = ["pytester"]


def visible_gpus() -> list[str]:
    """The GPUs this process may use, counted without starting CUDA (which reads
    CUDA_VISIBLE_DEVICES once, as it starts): CUDA_VISIBLE_DEVICES's entries where it is
    set, else an index for each GPU NVML counts; none where NVML does not load (no driver)."""
    if "CUDA_VISIBLE_DEVICES" in os.environ:
        return gpus.visible_gpus()
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # pynvml raises kinds of its own (NVMLError_LibraryNotFound, ...)
        return []
    try:
        return [str(i) for i in range(pynvml.nvmlDeviceGetCount())]
    finally:
        pynvml.nvmlShutdown()


def xdist_worker(environ: Mapping[str, str]) -> tuple[int, int] | None:
    """This pytest-xdist worker's number and the run's count of workers (``gw3`` of 4 is
    (3, 4)), from the variables xdist sets before the worker loads any conftest; None
    outside a worker."""
    worker, count = environ.get("PYTEST_XDIST_WORKER", ""), environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if not (worker.startswith("gw") and worker[2:].isdigit() and count.isdigit()):
        return None
    return int(worker[2:]), int(count)


def gpu_group(worker: int, workers: int, visible: list[str]) -> list[str] | None:
    """The GPUs of worker number ``worker`` of ``workers``: the worker's own run of
    len(visible) // workers of them, disjoint from the others' (a remainder goes unused; a
    worker xdist started to replace one, numbered from ``workers`` up, takes number
    ``worker`` mod ``workers``'s).  None where there is nothing to share out, with one worker
    or fewer GPUs than workers: each worker then sees every GPU."""
    if workers < 2 or len(visible) < workers:
        return None
    size = len(visible) // workers
    start = worker % workers * size
    return visible[start:start + size]


def gpu_groups_line(workers: int, visible: list[str]) -> str | None:
    """The report header's line on how ``visible`` GPUs are shared out among ``workers``
    xdist workers (``take_gpu_group``), or why they are not; None without GPUs."""
    if not visible:
        return None
    groups = [gpu_group(k, workers, visible) for k in range(workers)]
    if groups[0] is None:
        why = "one worker" if workers < 2 else "fewer GPUs than workers"
        return (f"GPUs: {len(visible)} for {workers} xdist worker(s), not shared out ({why}): "
                "each worker sees every GPU")
    return (f"GPUs: {len(visible)} for {workers} xdist workers, {len(groups[0])} each (CUDA_VISIBLE_DEVICES): "
            + "; ".join(f"gw{k} {','.join(group or [])}" for k, group in enumerate(groups)))


def take_gpu_group() -> None:
    """In a pytest-xdist worker: CUDA_VISIBLE_DEVICES set to the worker's own GPUs
    (``gpu_group``), so that tests in different workers, and the pytest processes they
    start, never share a GPU; ``-n 2`` on four GPUs gives each worker two, as a distributed
    test's ranks need."""
    worker = xdist_worker(os.environ)
    if worker is None or worker[1] < 2:
        return
    visible = visible_gpus()
    group = gpu_group(*worker, visible)
    if group is not None:
        os.environ[ALL_GPUS] = ",".join(visible)
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(group)


#: Where a worker that took a group of the GPUs keeps the list of them all (``all_gpus``).
ALL_GPUS = "GPUPROF_TEST_ALL_GPUS"
#: Where the lock files of ``gpu_turn`` lie: a folder all of a run's xdist workers share.
TURN_FOLDER = "GPUPROF_TEST_GPU_TURNS"


def all_gpus() -> list[str]:
    """Every GPU this run may use, the other xdist workers' included: what a test that needs
    them all (four ranks on a machine of four, run by two workers of two) hands its pytest
    processes, which then run alone (``gpu_turn``)."""
    return os.environ[ALL_GPUS].split(",") if ALL_GPUS in os.environ else visible_gpus()


@contextlib.contextmanager
def gpu_turn(alone: bool):
    """A pytest process on the GPUs in turn with the other xdist workers': one that uses every
    GPU (``alone``) waits until no other worker's process runs and keeps them waiting while it
    runs; the others run side by side.  Everyone takes a gate first, so that a process waiting
    to run alone holds the others back instead of waiting for a gap between theirs.  Without
    xdist there is nobody to wait for."""
    folder = os.environ.get(TURN_FOLDER)
    if not folder:
        yield
        return
    with open(Path(folder) / "gpu.gate", "a") as gate, open(Path(folder) / "gpu.turn", "a") as turn:
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(turn, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(turn, fcntl.LOCK_UN)


def run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A temporary folder the whole run shares: under pytest-xdist the workers' base
    temporary folders' common parent, else the base temporary folder."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if xdist_worker(os.environ) else base


@pytest.fixture(autouse=True, scope="session")
def _gpu_turns_shared(tmp_path_factory):
    """Under xdist, ``gpu_turn``'s folder: the workers' base temporary folders' common parent."""
    if xdist_worker(os.environ) is None:
        yield
        return
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv(TURN_FOLDER, str(run_folder(tmp_path_factory)))
        yield


# now, as this conftest loads: before torch is imported below, and before any test or
# plugin hook could start CUDA
take_gpu_group()

# torch is imported once, before any in-process pytester run snapshots sys.modules: a run
# that drops modules it imported would leave torch to be imported again later in a state
# its C extension does not survive ("SystemError: bad call flags", then a crash).
with contextlib.suppress(ImportError):
    import torch  # noqa: F401
import pandas  # noqa: F401,E402

# what is loaded now (torch, pandas, pytest: some 200,000 objects) lives as long as the
# process: kept out of the garbage collector's full collections, which the in-process pytester
# runs and pytest's own unconfigure (two gc.collect() a run) would otherwise spend scanning it
gc.freeze()


def pytest_report_header(config: pytest.Config) -> str | None:
    """In the controller of an xdist run: how the workers share the GPUs out, or why not."""
    if hasattr(config, "workerinput") or config.getoption("dist", "no") == "no":
        return None
    from xdist.workermanage import parse_tx_spec_config  # the workers xdist starts: -n N, --tx 2*popen

    return gpu_groups_line(len(parse_tx_spec_config(config)), visible_gpus())


@pytest.fixture(autouse=True, scope="session")
def _no_github_step_summary():
    """The suites run here must not append their summaries to the CI job's own summary
    ($GITHUB_STEP_SUMMARY is set in every GitHub Actions step), nor those a module records
    once for several tests; tests set it themselves."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
        yield


#: What every pytest process a test starts is given (PYTEST_ADDOPTS): no Hypothesis plugin, whose
#: import of all of Hypothesis took 1.3 of a child's 2.3 s of start-up (the tests start hundreds).
CHILD_ADDOPTS = "-p no:hypothesispytest"


@pytest.fixture(autouse=True, scope="session")
def _children_environment(tmp_path_factory):
    """For the child processes tests start themselves (``subprocess``, gpuprof's own): no
    Hypothesis plugin, and their bytecode cached in one folder for the whole run
    (PYTHONPYCACHEPREFIX), outside the checkout, even where PYTHONDONTWRITEBYTECODE is set
    (as on this project's machines): each child compiled the package's modules again, and
    pytest rewrote the plugin's asserts again, about 0.5 s of a child's CPU."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv("PYTEST_ADDOPTS", f"{os.environ.get('PYTEST_ADDOPTS', '')} {CHILD_ADDOPTS}".strip())
        monkeypatch.setenv("PYTHONPYCACHEPREFIX", str(run_folder(tmp_path_factory) / "pycache"))
        monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
        yield


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytester's, which clears PYTEST_ADDOPTS, with the children's options set again."""
    monkeypatch.setenv("PYTEST_ADDOPTS", CHILD_ADDOPTS)
    return pytester


#: The checkout's root (the wheel's sources).
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    """The wheel of this checkout, as the README's step 1 builds it (``pip wheel --no-deps .``),
    from a copy of the files the build reads: built in the checkout, it would leave its
    pytest_gpuprof.egg-info there, and a pytest started later with the checkout on sys.path
    (PYTHONPATH) would find the plugin's entry point there first, loading the plugins in
    another order (``-n auto`` then no longer starts a worker per GPU).  Built once for the run
    (``once_per_run``)."""
    from helpers.once import once_per_run  # here: tests/project/test_gpu_groups.py runs this file where helpers is not

    def build(out: Path) -> subprocess.CompletedProcess:
        source = out / "source"
        source.mkdir()
        for name in ("pyproject.toml", "README.md", "LICENSE"):
            shutil.copy(ROOT / name, source)
        shutil.copytree(ROOT / "pytest_gpuprof", source / "pytest_gpuprof",
                        ignore=shutil.ignore_patterns("__pycache__"))
        return subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out / "wheel"),
                               str(source)], capture_output=True, text=True)

    out, built = once_per_run(tmp_path_factory, "wheel", build)
    assert built.returncode == 0, built.stdout + built.stderr
    (found,) = (out / "wheel").glob("pytest_gpuprof-*.whl")
    return found


@pytest.fixture(scope="session")
def planted_replay(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """benchmarks/report_size.py's replay of the planted bugs (four tests failing, two
    passing) against baselines recorded from the shipped traces, writing every report in its
    folder: report.html, summary.md, results.json, junit.xml; and its process.  Made once for
    the run (tests/report reads it in four modules)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from helpers.once import once_per_run
    from report_size import failing_report

    def make(out: Path) -> subprocess.CompletedProcess:
        return failing_report(out, f"--gpuprof-json={out / 'results.json'}", f"--junitxml={out / 'junit.xml'}")

    return once_per_run(tmp_path_factory, "planted", make)


@pytest.fixture(scope="session")
def item_replay(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """The example suite replayed against the shipped baselines, the MoE test's planted
    ``.item()`` in place (tests/helpers/example_suite.py: it fails), in its folder with every
    report: results.json, summary.md, bench.json, junit.xml, the traces replayed in replay/;
    and its process.  Made once for the run (tests/report/test_results.py, tests/cli's diff and merge)."""
    from helpers.example_suite import replay_dir, run_suite
    from helpers.once import once_per_run

    def make(out: Path) -> subprocess.CompletedProcess:
        return run_suite(out, replay_dir(out / "replay"), "--gpuprof-json", "results.json", "--gpuprof-summary",
                         "summary.md", "--gpuprof-benchmark-json", "bench.json", "--junitxml", "junit.xml")

    return once_per_run(tmp_path_factory, "item", make)
