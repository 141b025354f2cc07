"""The capture loop on the CPU: torch.profiler records CPU activity here, which is
enough to check the steps, ranges and metadata the fixture writes into a trace.
torch.cuda's memory and device calls are stood in for (there is no GPU)."""

import pytest

from pytest_gpuprof.capture import profiler as capture
from pytest_gpuprof.capture.marker import marker_problems
from pytest_gpuprof.capture.profiler import GpuProf, StepPlan
from pytest_gpuprof.errors import ConfigError, TraceError
from pytest_gpuprof.metrics.measure import measure
from pytest_gpuprof.metrics.steps import find_steps
from pytest_gpuprof.trace.kineto import load_kineto

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore:CUDA is not available")


@pytest.fixture
def no_gpu_needed(monkeypatch):
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda device=None: None)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: 12345)
    monkeypatch.setattr(capture, "gpu_environment", lambda device=0: {"gpu": "stand-in"})
    monkeypatch.setattr(capture, "pcie_link", lambda device: {"generation": 5, "width": 16})


def test_torch_capture_writes_steps_ranges_and_metadata(tmp_path, no_gpu_needed):
    prof = GpuProf(StepPlan(wait=1, warmup=2, active=3), tmp_path / "t.pt.trace.json.gz")
    ran = []
    for i in prof.steps():
        with prof.range("work"):
            ran.append(i)
            torch.ones(8).sum()
    assert ran == list(range(6)) and prof.completed
    trace = load_kineto(tmp_path / "t.pt.trace.json.gz")
    names = trace.ranges["name"].astype(str).tolist()
    # three consecutive step ranges; their numbers are torch's (#3-#5 since torch 2.3, #2-#4 before:
    # pytorch#121127), and the metrics never read them
    numbers = sorted(int(n.removeprefix("ProfilerStep#")) for n in names if n.startswith("ProfilerStep#"))
    assert len(numbers) == 3 and numbers == list(range(numbers[0], numbers[0] + 3)) and numbers[0] in (2, 3)
    assert [n for n in names if n.startswith("step_")] == ["step_0", "step_1", "step_2"]
    assert names.count("work") == 3  # measured steps only: warm-up is not recorded
    # the lighter recording needs a torch newer than 2.1 (CI's oldest job runs 2.1.2)
    lighter = bool(capture._lighter_recording())
    major, minor = (int(x) for x in torch.__version__.split(".")[:2])
    assert lighter or (major, minor) < (2, 3)  # torch 2.3 and later have it
    assert trace.metadata == {"peak_memory_allocated_bytes": 12345, "environment": {"gpu": "stand-in"},
                              "plan": {"wait": 1, "warmup": 2, "active": 3, "flush_l2": False},
                              "lighter_recording": lighter, "pcie_link": {"generation": 5, "width": 16}}
    steps, source = find_steps(trace)
    assert len(steps) == 3 and source == "ProfilerStep#N"
    with pytest.raises(TraceError, match="no GPU work to measure: it holds no kernel, memcpy or memset on any GPU"):
        measure(trace)  # a CPU machine's capture: nothing to measure


def test_a_torch_without_the_lighter_recording_records_that_in_the_trace(tmp_path, no_gpu_needed, monkeypatch):
    monkeypatch.setattr(capture, "_lighter_recording", lambda: {})
    prof = GpuProf(StepPlan(wait=0, warmup=1, active=1), tmp_path / "t.pt.trace.json.gz")
    for _ in prof.steps():
        torch.ones(8).sum()
    assert load_kineto(tmp_path / "t.pt.trace.json.gz").metadata["lighter_recording"] is False


def test_flush_l2_overwrites_the_buffer_before_every_step_outside_its_step_range(tmp_path, no_gpu_needed, monkeypatch):
    buffers = []

    def stand_in_buffer(device):
        buffers.append(torch.ones(64, dtype=torch.int8))
        return buffers[-1]

    monkeypatch.setattr(capture, "_l2_flush_buffer", stand_in_buffer)
    prof = GpuProf(StepPlan(wait=0, warmup=1, active=2, flush_l2=True), tmp_path / "t.pt.trace.json.gz")
    seen = []
    for _ in prof.steps():
        seen.append(int(buffers[0].sum()))  # zeroed before the step's body runs
        buffers[0].fill_(1)
    assert len(buffers) == 1 and seen == [0, 0, 0]
    trace = load_kineto(tmp_path / "t.pt.trace.json.gz")
    ranges = trace.ranges.assign(name=trace.ranges["name"].astype(str))
    flushes = ranges[ranges["name"] == "gpuprof_l2_flush"].sort_values("start")
    steps = ranges[ranges["name"].str.startswith("step_")].sort_values("start")
    assert len(flushes) == 2 and len(steps) == 2  # measured steps only, as the other ranges
    # each measured step's flush ends before the step's own range begins, after the previous step's end
    assert (flushes["end"].to_numpy() <= steps["start"].to_numpy()).all()
    assert flushes["start"].to_numpy()[1] >= steps["end"].to_numpy()[0]
    assert trace.metadata["plan"]["flush_l2"] is True


def test_nvtx_capture_marks_the_metadata(monkeypatch, no_gpu_needed):
    nvtx = pytest.importorskip("nvtx")
    marks, pushed = [], []
    monkeypatch.setattr(nvtx, "mark", lambda message, domain=None, **kw: marks.append((message, domain)))
    monkeypatch.setattr(nvtx, "push_range", lambda message, domain=None, **kw: pushed.append(message))
    prof = GpuProf(StepPlan(wait=0, warmup=1, active=2), nvtx_only=True)
    assert len(list(prof.steps())) == 3 and prof.completed
    assert pushed == ["warmup", "step_0", "step_1"]
    (message, domain), = marks
    assert domain == capture.NVTX_DOMAIN and message.startswith("gpuprof:{")
    assert '"peak_memory_allocated_bytes": 12345' in message


@pytest.mark.parametrize("process_steps", [False, True])
def test_under_ncu_each_measured_step_is_also_a_process_wide_range(monkeypatch, no_gpu_needed, process_steps):
    nvtx = pytest.importorskip("nvtx")
    events = []
    monkeypatch.setattr(nvtx, "mark", lambda message, domain=None, **kw: None)
    monkeypatch.setattr(nvtx, "push_range", lambda message, domain=None, **kw: events.append(("push", message)))
    monkeypatch.setattr(nvtx, "pop_range", lambda domain=None: events.append(("pop", None)))
    monkeypatch.setattr(nvtx, "start_range",
                        lambda message, domain=None, **kw: events.append(("start", message, domain))
                        or (len(events), domain))
    monkeypatch.setattr(nvtx, "end_range", lambda handle: events.append(("end", handle)))
    prof = GpuProf(StepPlan(wait=0, warmup=1, active=2), nvtx_only=True, process_steps=process_steps)
    for i in prof.steps():
        events.append(("body", i))
    ranges = [("push", "warmup"), ("body", 0), ("pop", None)]
    for i in (1, 2):
        step = f"step_{i - 1}"
        handle = (len(ranges) + 2, capture.NVTX_DOMAIN)  # start_range's answer: what end_range is given
        ranges += [("push", step), ("start", step, capture.NVTX_DOMAIN), ("body", i), ("end", handle), ("pop", None)] \
            if process_steps else [("push", step), ("body", i), ("pop", None)]
    assert events == ranges


def test_a_loop_left_early_is_not_complete(tmp_path, no_gpu_needed):
    prof = GpuProf(StepPlan(wait=0, warmup=1, active=3), tmp_path / "t.json")
    for i in prof.steps():
        if i == 1:
            break
    assert not prof.completed


def test_plain_loop_and_single_use():
    prof = GpuProf(StepPlan(wait=1, warmup=1, active=2))
    assert list(prof.steps(active=4)) == list(range(6)) and prof.completed
    with pytest.raises(ConfigError, match="once per test"):
        list(prof.steps())


@pytest.mark.parametrize("kwargs, words", [({"active": 0}, "active must be at least 1"),
                                          ({"warmup": -1}, "warmup must be a non-negative integer"),
                                          ({"wait": True}, "wait must be a non-negative integer"),
                                          ({"flush_l2": 1}, "flush_l2 must be True or False")])
def test_bad_plans_are_refused(kwargs, words):
    with pytest.raises(ConfigError, match=words):
        StepPlan().with_overrides(**kwargs)


def test_the_runs_floor_on_measured_steps_lifts_what_a_test_asks_and_is_no_marker_argument():
    plan = StepPlan(wait=1, warmup=2, active=10, min_active=25)
    assert plan.active == 25 and plan.with_overrides(active=3).active == 25
    assert plan.with_overrides(active=40).active == 40  # a test asking more keeps its own
    assert StepPlan(min_active=0).with_overrides(active=3).active == 3
    prof = GpuProf(StepPlan(wait=0, warmup=1, active=2, min_active=5))
    assert len(list(prof.steps(active=3))) == 1 + 5
    assert marker_problems((), {"min_active": 5})[0].startswith("unknown argument(s) min_active")
    with pytest.raises(ConfigError, match="min_active must be a non-negative integer"):
        StepPlan(min_active=-1)


def test_overrides_that_are_none_keep_the_plan():
    plan = StepPlan(wait=1, warmup=2, active=3, flush_l2=True)
    assert plan.with_overrides(wait=None, warmup=None, active=None, flush_l2=None) == plan
    assert plan.with_overrides(active=7, flush_l2=False) == StepPlan(1, 2, 7, False)
