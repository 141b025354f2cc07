"""Where a profiled test's trace comes from: one interface, one class per way.

``TorchBackend`` profiles in this process with torch.profiler; ``ReplayBackend``
runs nothing and reads kept traces; ``NsysInnerBackend`` is the session that
``nsys_backend`` re-runs under Nsight Systems: it only emits NVTX ranges, and the
outer session judges the tests from nsys's report once it is written.  The plugin
objects of a process are chosen once from what its backend can do (``in_process``,
``runs_tests``), never from which it is.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NotRequired, Protocol, TypedDict

from ..capture.environment import no_cuda
from ..capture.profiler import GpuProf, StepPlan
from ..capture.ranges import nvtx_range
from ..compare.distributed import rank_nodeid
from ..errors import GpuprofError
from ..options import option_args
from ..trace.kineto import load_kineto
from ..trace.model import Trace
from .kept_traces import TRACE_SUFFIX, KeptTraces, unique_trace_name
from .rank_processes import RankOutcome, RankProfiling, rank_trace

#: Why a test that passed without finishing its steps() loop is an error, under either backend.
UNFINISHED_LOOP = ("the test uses the gpuprof fixture but did not run its `for _ in gpuprof.steps(...)` loop "
                   "to the end; nothing was measured")

#: Why a profiled test is skipped on a machine without a GPU (pytest's skip reason adds
#: "gpuprof: "), with why there is none (``capture.environment.no_cuda``).
NO_GPU = "no CUDA GPU available ({why})"

def ranks_folder(parent: Path, nodeid: str) -> Path:
    """The folder in ``parent`` of a distributed test's ranks' files, named like its trace."""
    return parent / f"{unique_trace_name(nodeid).removesuffix(TRACE_SUFFIX)}.ranks"


def _fresh(folder: Path) -> Path:
    """``folder``, emptied of what an earlier run left."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


class HandedOver(TypedDict):
    """(inside nsys) A profiled test that ran, for the session outside nsys, which judges it
    from nsys's report: its marker's arguments, whether its steps loop ran to the end, and for
    a distributed test, each rank's process and the ranks that left their loop unfinished."""

    nodeid: str
    marker: dict[str, object]
    completed: bool
    unfinished: NotRequired[list[int]]
    ranks: NotRequired[dict[str, int]]


class Backend(Protocol):
    """How a pytest run obtains each profiled test's trace.  A backend names it as its base
    and takes its bodies where it has nothing to do: it expects no test, is unmeasurable only
    where it needs a GPU and has none, opens nothing, keeps no trace and holds nothing."""

    name: str  # recorded in baselines: "torch" or "nsys"
    runs_tests: bool  # False: the test bodies are not run at all
    needs_gpu: bool  # True: profiled tests are skipped where torch sees no CUDA device
    # the trace is this process's own capture, read as the test ends: a test may be measured
    # again in fresh processes (confirmation, the base revision, Nsight Compute) and its
    # pytest-benchmark fixture wrapped
    in_process: bool

    def profiler(self, nodeid: str, plan: StepPlan) -> GpuProf:
        """The ``gpuprof`` fixture object of one test."""

    def expect(self, nodeids: list[str]) -> None:
        """The run's profiled tests, once collected."""
        return None

    def unmeasurable(self, nodeid: str) -> str | None:
        """Why the test (a distributed test's: its rank 0's node id) cannot be measured here,
        or None."""
        return _no_gpu() if self.needs_gpu else None

    def start(self) -> None:
        """A profiled test's call begins."""
        return None

    @contextmanager
    def around_call(self, nodeid: str) -> Iterator[None]:
        """A profiled test's call (``start``), inside an NVTX range named for the test where its
        body runs."""
        self.start()
        if not self.runs_tests:
            yield
            return
        with nvtx_range(nodeid):
            yield

    def trace(self, nodeid: str, prof: GpuProf) -> tuple[Trace, Path | None] | None:
        """The finished test's trace and the file kept of it; None when the trace is
        judged later, elsewhere (under nsys)."""

    def rank_profiling(self, nodeid: str, plan: list[str], timeline_events: int) -> RankProfiling:
        """How a distributed test's ranks measure (``rank_processes.spawn``), given the run's step plan as
        options and the timeline events kept: each rank measures its own steps and is judged
        against nothing, writing into a fresh folder of this test's."""

    def rank_traces(self, nodeid: str, size: int, outcomes: list[RankOutcome]) -> dict[int, tuple[Trace, Path | None]]:
        """Each rank's trace of a distributed test of ``size`` ranks (``outcomes``: how its
        spawned ranks ended) and the file kept of it."""

    @property
    def kept_traces(self) -> Path | None:
        """The folder of the traces the results name, or None."""
        return None

    def close(self) -> None:
        """End of the run: release what the backend holds."""
        return None


def _no_gpu() -> str | None:
    """``NO_GPU`` where this process can use no CUDA GPU."""
    why = no_cuda()
    return None if why is None else NO_GPU.format(why=why)


class TorchBackend(Backend):
    """torch.profiler in this process: one Kineto trace per test, kept or deleted once read."""

    name, runs_tests, needs_gpu, in_process = "torch", True, True, True

    def __init__(self, output_dir: Path, keep_traces: bool) -> None:
        self._keep = keep_traces
        self._tmp = tempfile.TemporaryDirectory(prefix="gpuprof-")
        self.folder = output_dir / "traces" if keep_traces else Path(self._tmp.name)

    def profiler(self, nodeid: str, plan: StepPlan) -> GpuProf:
        self.folder.mkdir(parents=True, exist_ok=True)
        return GpuProf(plan, self.folder / unique_trace_name(nodeid))

    def rank_profiling(self, nodeid: str, plan: list[str], timeline_events: int) -> RankProfiling:
        """Each rank profiles with torch.profiler, writing its results and trace into the
        test's folder beside this run's traces."""
        folder = _fresh(ranks_folder(self.folder, nodeid))
        (folder / "baselines").mkdir()
        return RankProfiling([*option_args({"baseline-dir": folder / "baselines", "confirm": 0,
                                            "timeline-events": timeline_events}), *plan], folder)

    def rank_traces(self, nodeid: str, size: int, outcomes: list[RankOutcome]) -> dict[int, tuple[Trace, Path | None]]:
        """The trace each rank kept, moved (with ``--gpuprof-keep-traces``) beside the other
        tests' traces under its ``rank_nodeid``'s name, where a replay finds it."""
        traces = {o.rank: rank_trace(o, nodeid) for o in sorted(outcomes)}
        if self._keep:
            traces = {rank: path.replace(self.folder / unique_trace_name(rank_nodeid(nodeid, rank)))
                      for rank, path in traces.items()}
        return {rank: (load_kineto(path), path if self._keep else None) for rank, path in traces.items()}

    @property
    def kept_traces(self) -> Path | None:
        return self.folder if self._keep else None

    def trace(self, nodeid: str, prof: GpuProf) -> tuple[Trace, Path | None]:
        path = prof.trace_path
        if not prof.completed or path is None:
            raise GpuprofError(UNFINISHED_LOOP)
        try:
            return load_kineto(path), path if self._keep else None
        finally:
            if not self._keep:
                path.unlink(missing_ok=True)

    def close(self) -> None:
        self._tmp.cleanup()


class ReplayBackend(Backend):
    """Kept traces judged again: the tests are not run, no GPU is needed."""

    name, runs_tests, needs_gpu, in_process = "torch", False, False, False

    def __init__(self, replay_dir: Path) -> None:
        self.replay_dir = replay_dir
        self._kept = KeptTraces(replay_dir)

    def expect(self, nodeids: list[str]) -> None:
        """The run's profiled tests: a trace two of them could have is replayed for neither."""
        self._kept.expect(nodeids)

    def unmeasurable(self, nodeid: str) -> str | None:
        """Why the test cannot be replayed (no trace of it here), or None; a trace that could
        be another's too fails the test when it is read (``path``)."""
        try:
            found = self._kept.find(nodeid)
        except GpuprofError:
            return None
        return None if found is not None else self._kept.missing(nodeid)

    def path(self, nodeid: str) -> Path:
        """The test's trace (``kept_traces.KeptTraces.find``)."""
        found = self._kept.find(nodeid)
        if found is None:
            raise GpuprofError(self._kept.missing(nodeid))
        return found

    def profiler(self, nodeid: str, plan: StepPlan) -> GpuProf:
        return GpuProf(plan)

    def trace(self, nodeid: str, prof: GpuProf) -> tuple[Trace, Path]:
        path = self.path(nodeid)
        return load_kineto(path), path

    def rank_profiling(self, nodeid: str, plan: list[str], timeline_events: int) -> RankProfiling:
        raise GpuprofError("a replay runs no test: its ranks' traces are replayed")

    def rank_traces(self, nodeid: str, size: int, outcomes: list[RankOutcome]) -> dict[int, tuple[Trace, Path | None]]:
        """Each rank's kept trace, under its ``rank_nodeid``'s name."""
        paths = {rank: self.path(rank_nodeid(nodeid, rank)) for rank in range(size)}
        return {rank: (load_kineto(path), path) for rank, path in paths.items()}


class NsysInnerBackend(Backend):
    """Inside ``nsys profile``: NVTX ranges only (nsys owns CUPTI), within one
    cudaProfilerStart/Stop capture range opened before the first profiled test.  A
    distributed test's rank opens none (``owns_capture`` False): nsys records the processes
    the session starts inside its range, and the range ends at the first cudaProfilerStop
    (``--capture-range-end=stop``), so a rank closing its own would end every rank's.
    Under ncu (``process_steps``) each measured step is also a process-wide range, which
    ncu's filter follows into every thread (``run.kernel_profiling``)."""

    name, runs_tests, needs_gpu, in_process = "nsys", True, True, False

    def __init__(self, results: Path, owns_capture: bool = True, process_steps: bool = False) -> None:
        self._results = results
        self._owns_capture = owns_capture
        self._process_steps = process_steps
        self._capturing = False

    def profiler(self, nodeid: str, plan: StepPlan) -> GpuProf:
        return GpuProf(plan, nvtx_only=True, process_steps=self._process_steps)

    def start(self) -> None:
        """Open nsys's capture range (cudaProfilerStart) before the first profiled test."""
        if self._owns_capture and not self._capturing:
            import torch

            torch.cuda.profiler.start()
            self._capturing = True

    def trace(self, nodeid: str, prof: GpuProf) -> None:
        return None

    def rank_profiling(self, nodeid: str, plan: list[str], timeline_events: int) -> RankProfiling:
        """The ranks measure nothing themselves: each marks its steps in NVTX inside this
        session's capture range, opened now, and writes which process it was."""
        folder = _fresh(ranks_folder(self._results.parent, nodeid))
        self.start()
        return RankProfiling(plan, folder, nsys=True)

    def rank_traces(self, nodeid: str, size: int, outcomes: list[RankOutcome]) -> dict[int, tuple[Trace, Path | None]]:
        raise GpuprofError("under nsys the session outside judges the ranks, from its report")

    def close(self) -> None:
        """Close the capture range once every test has run."""
        if self._capturing:
            import torch

            torch.cuda.synchronize()
            torch.cuda.profiler.stop()
            self._capturing = False

    def finish(self, tests: list[HandedOver], exitstatus: int, machine: dict[str, float] | None,
               skipped: dict[str, str]) -> None:
        """End of the tests: close the capture range and tell the outer session which profiled tests ran to the
        end, which were skipped and why (its reports list them, a strict gate fails on them),
        and the machine's probes."""
        self.close()
        self._results.write_text(json.dumps({"tests": tests, "skipped": skipped, "exitstatus": int(exitstatus),
                                             "machine": machine, "pid": os.getpid()}, indent=2))
