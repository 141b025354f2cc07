"""What capture records beside the events, on the CPU: which GPU NVML reads (a stand-in
NVML of two GPUs and a stand-in CUDA numbering), the machine probes without
``torch.cuda._sleep``, the git commit and time of a measurement, and the note for a
trace recorded without torch.profiler's lighter recording."""

import ctypes
import hashlib
import subprocess
import sys
import time
import types
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pytest_gpuprof.capture import environment, nvml, probes
from pytest_gpuprof.compare.evaluate import Measured, evaluate
from pytest_gpuprof.compare.rules import Rules
from pytest_gpuprof.metrics.measure import measure
from pytest_gpuprof.trace.kineto import load_kineto

torch = pytest.importorskip("torch")

TRACE = Path(__file__).resolve().parents[2] / "example_suite" / "traces" / \
    "example_suite_test_moe.py_test_moe_forward.pt.trace.json.gz"


# --- which GPU NVML reads -----------------------------------------------------

class StandInGpu(types.SimpleNamespace):
    """One GPU as NVML knows it."""


#: NVML's numbering: every GPU of the machine, in PCI order
GPUS = [
    StandInGpu(uuid="GPU-0a0a0a0a-0000-4000-8000-00000000000a", clock=1005, reasons=0x20, pids=[4242]),
    StandInGpu(uuid="GPU-1b1b1b1b-1111-4111-8111-11111111111b", clock=1980, reasons=0, pids=[]),
]


def stand_in_pynvml() -> types.ModuleType:
    """nvidia-ml-py's functions that gpuprof calls, over GPUS."""
    nvml_module = types.ModuleType("pynvml")

    class NVMLError(Exception):
        pass

    def by_uuid(uuid):
        wanted = uuid.decode() if isinstance(uuid, bytes) else uuid
        for gpu in GPUS:
            if gpu.uuid == wanted:
                return gpu
        raise NVMLError("Not Found")

    nvml_module.__dict__.update(
        NVMLError=NVMLError, NVML_CLOCK_SM=1,
        nvmlInit=lambda: None, nvmlShutdown=lambda: None,
        nvmlSystemGetDriverVersion=lambda: "580.65.06",
        nvmlDeviceGetHandleByIndex=lambda i: GPUS[i],
        nvmlDeviceGetHandleByUUID=by_uuid,
        nvmlDeviceGetClockInfo=lambda h, clock: h.clock,
        nvmlDeviceGetCurrentClocksEventReasons=lambda h: h.reasons,
        nvmlDeviceGetComputeRunningProcesses=lambda h: [types.SimpleNamespace(pid=p) for p in h.pids],
    )
    return nvml_module


def cuda_numbering() -> list[int]:
    """CUDA's devices as NVML numbers them: those CUDA_VISIBLE_DEVICES lists, in its order."""
    import os

    return [int(i) for i in os.environ["CUDA_VISIBLE_DEVICES"].split(",")]


@pytest.fixture
def two_gpus_second_visible(monkeypatch):
    """NVML sees two GPUs; CUDA_VISIBLE_DEVICES=1 shows torch only the second, as its device 0."""
    monkeypatch.setitem(sys.modules, "pynvml", stand_in_pynvml())
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)


def uuid_property(device):
    """torch >= 2.4: the properties carry the UUID's 16 bytes (as a list of ints)."""
    raw = bytes.fromhex(GPUS[cuda_numbering()[device]].uuid.removeprefix("GPU-").replace("-", ""))
    return types.SimpleNamespace(uuid=types.SimpleNamespace(bytes=list(raw)))


class StandInDriver:
    """libcuda's cuInit, cuDeviceGet and cuDeviceGetUuid over CUDA's numbering."""

    def cuInit(self, flags):
        return 0

    def cuDeviceGet(self, handle, ordinal):
        handle._obj.value = cuda_numbering()[ordinal]  # the driver's own handle: here NVML's number
        return 0

    def cuDeviceGetUuid(self, raw, handle):
        uuid = GPUS[handle.value].uuid
        ctypes.memmove(raw, bytes.fromhex(uuid.removeprefix("GPU-").replace("-", "")), 16)
        return 0


@pytest.fixture(params=["torch properties", "CUDA driver"])
def uuid_source(request, monkeypatch, two_gpus_second_visible):
    """Where the UUID comes from: torch's device properties, or the driver for an older torch."""
    if request.param == "torch properties":
        monkeypatch.setattr(torch.cuda, "get_device_properties", uuid_property)
        monkeypatch.setattr(ctypes, "CDLL", lambda name: pytest.fail("the driver was asked"))
    else:
        monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: types.SimpleNamespace())
        monkeypatch.setattr(ctypes, "CDLL", lambda name: StandInDriver() if name == "libcuda.so.1" else None)
    return request.param


def test_torch_device_0_under_cuda_visible_devices_1_is_nvml_device_1(uuid_source):
    assert nvml.device_uuid(0) == "GPU-1b1b1b1b-1111-4111-8111-11111111111b"


def test_the_sampler_reads_the_gpu_that_is_measured(uuid_source):
    sampler = nvml.NvmlSampler.start(0)
    assert sampler is not None
    time.sleep(0.1)
    readings = sampler.stop()
    assert readings["samples"] >= 1
    # GPU 1's clock, no slowdown, no other process; GPU 0 (NVML's index 0) would read
    # 1005 MHz, a thermal slowdown and pid 4242
    assert readings["sm_clock_mhz"] == [1980, 1980]
    assert readings["slowdowns"] == [] and readings["other_processes"] == []


def test_the_sampler_stamps_each_sample_and_step_start_with_the_host_clock(uuid_source):
    """What puts the samples on the trace's timeline (metrics.clock): each sample and each
    step's anchor read time.time_ns(), in the order they were taken."""
    before = time.time_ns()
    sampler = nvml.NvmlSampler.start(0)
    sampler.anchor()
    time.sleep(0.05)
    sampler.anchor()
    readings = sampler.stop()
    after = time.time_ns()
    samples = readings["clock_samples"]
    assert len(samples) == readings["samples"] >= 2
    assert [t for t, _, _ in samples] == sorted(t for t, _, _ in samples)
    assert all(before <= t <= after and (mhz, reasons) == (1980, 0) for t, mhz, reasons in samples)
    first, second = readings["step_anchors_ns"]
    assert before <= first and second - first >= 50_000_000 and second <= after


def test_the_clock_probe_reads_the_gpu_that_is_measured(uuid_source):
    assert probes._sm_clock(0, lambda: None) == 1980.0


def test_a_gpu_nvml_cannot_find_gives_no_readings_rather_than_another_gpus(monkeypatch, two_gpus_second_visible):
    """A device NVML does not know by that UUID (a MIG instance): no clock, no sampler."""
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda device: types.SimpleNamespace(uuid=types.SimpleNamespace(bytes=[7] * 16)))
    assert probes._sm_clock(0, lambda: None) is None
    assert nvml.NvmlSampler.start(0) is None


# --- the machine probes without torch.cuda._sleep -----------------------------

@pytest.fixture
def probes_on_the_cpu(monkeypatch):
    """measure_machine's tensors on the CPU; the launch and clock probes stood in for."""
    for name in ("empty", "randn", "zeros"):
        real = getattr(torch, name)
        monkeypatch.setattr(torch, name, lambda *a, device=None, _real=real, **k: _real(*a, **k))
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self: self)
    monkeypatch.setattr(torch.cuda, "device", lambda device: __import__("contextlib").nullcontext())
    monkeypatch.setattr(probes, "_launch_us", lambda tiny: 4.5)
    monkeypatch.setattr(probes, "_sm_clock", lambda device, work: 1980.0)
    monkeypatch.setattr(probes, "COPY_BYTES", 1 << 10)


def test_without_torch_cuda_sleep_the_gpu_timed_probes_are_left_out_with_a_warning(monkeypatch, probes_on_the_cpu):
    monkeypatch.delattr(torch.cuda, "_sleep", raising=False)
    monkeypatch.setattr(probes, "_gpu_us", lambda spin, work: pytest.fail("timed without a spin"))
    with pytest.warns(UserWarning, match=r"no torch\.cuda\._sleep"):
        assert probes.measure_machine(0) == {"launch_us": 4.5, "sm_clock_mhz": 1980.0}


def test_with_torch_cuda_sleep_every_probe_is_read_behind_the_spin(monkeypatch, probes_on_the_cpu):
    spins = []
    monkeypatch.setattr(torch.cuda, "_sleep", spins.append)

    def timed(spin, work):
        spin(probes.SPIN_CYCLES)
        return 2.0  # us

    monkeypatch.setattr(probes, "_gpu_us", timed)
    assert probes.measure_machine(0) == {"h2d_pinned_gbps": 0.512, "h2d_pageable_gbps": 0.512, "gemm_us": 2.0,
                                         "launch_us": 4.5, "sm_clock_mhz": 1980.0}  # 1024 B in 2 us
    assert spins == [probes.SPIN_CYCLES] * 3


# --- the revision and time of a measurement ------------------------------------

GIT_ENV = {"GIT_AUTHOR_NAME": "A", "GIT_AUTHOR_EMAIL": "a@example.com", "GIT_AUTHOR_DATE": "1700000000 +0000",
           "GIT_COMMITTER_NAME": "A", "GIT_COMMITTER_EMAIL": "a@example.com",
           "GIT_COMMITTER_DATE": "1700000000 +0000", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1",
           "PATH": "/usr/bin:/bin"}


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, env=GIT_ENV, check=True, capture_output=True)


def object_id(kind: str, body: bytes) -> str:
    return hashlib.sha1(f"{kind} {len(body)}\0".encode() + body).hexdigest()


def expected_commit() -> str:
    """The id git gives the one commit of ``repo`` below, worked out from git's object format."""
    blob = object_id("blob", b"x\n")
    tree = object_id("tree", b"100644 a.txt\0" + bytes.fromhex(blob))
    who = "A <a@example.com> 1700000000 +0000"
    return object_id("commit", f"tree {tree}\nauthor {who}\ncommitter {who}\n\nfirst\n".encode())


@pytest.fixture
def repo(tmp_path):
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "a.txt").write_text("x\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "a.txt")
    git(repo, "commit", "-q", "-m", "first")
    environment.commit_info.cache_clear()
    yield repo
    environment.commit_info.cache_clear()


def test_commit_info_names_the_commit_branch_and_a_clean_tree(repo):
    assert environment.commit_info(repo / "tests") == {"id": expected_commit(), "branch": "main", "dirty": False}


def test_commit_info_is_dirty_with_a_changed_tracked_file_not_with_an_untracked_one(repo):
    (repo / "new.txt").write_text("untracked\n")
    assert environment.commit_info(repo)["dirty"] is False
    environment.commit_info.cache_clear()
    (repo / "a.txt").write_text("y\n")
    assert environment.commit_info(repo)["dirty"] is True


def test_commit_info_on_a_detached_head_has_no_branch(repo):
    git(repo, "checkout", "-q", "--detach")
    assert environment.commit_info(repo) == {"id": expected_commit(), "branch": None, "dirty": False}


def test_outside_git_only_the_time_is_recorded(tmp_path, monkeypatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))  # no repository above tmp_path either
    environment.commit_info.cache_clear()
    assert environment.commit_info(tmp_path) is None
    assert set(environment.recorded(tmp_path)) == {"datetime"}
    monkeypatch.setenv("PATH", str(tmp_path))  # and without git at all
    environment.commit_info.cache_clear()
    assert environment.commit_info(tmp_path) is None


def test_the_environment_of_a_measurement_holds_its_commit_and_utc_time(repo, monkeypatch):
    monkeypatch.chdir(repo)
    monkeypatch.setitem(sys.modules, "pynvml", stand_in_pynvml())
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda device: types.SimpleNamespace(total_memory=1 << 30, major=9, minor=0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device: "NVIDIA H200")
    before = datetime.now(UTC).replace(microsecond=0)
    env = environment.gpu_environment(0)
    after = datetime.now(UTC)
    assert env["commit"] == {"id": expected_commit(), "branch": "main", "dirty": False}
    assert env["datetime"].endswith("+00:00") and before <= datetime.fromisoformat(env["datetime"]) <= after
    assert env["driver"] == "580.65.06" and env["gpu"] == "NVIDIA H200"


# --- a trace recorded without the lighter recording ---------------------------

@pytest.mark.parametrize("lighter, notes", [(True, 0), (None, 0), (False, 1)])
def test_a_trace_recorded_at_torchs_default_cost_says_so_in_the_notes(lighter, notes):
    trace = load_kineto(TRACE)
    if lighter is not None:  # None: a trace from before the key existed
        trace.metadata["lighter_recording"] = lighter
    m = measure(trace)
    for update in (True, False):
        result = evaluate(Measured.of(m, "torch"), m, None, Rules(), update=update)
        said = [n for n in result.notes if "disable_external_correlation" in n]
        assert len(said) == notes


def test_the_html_page_does_not_call_another_commit_or_time_an_environment_difference():
    from pytest_gpuprof.report.html.page import _environment_notes

    run = {"gpu": "NVIDIA H200", "driver": "580.65.06", "datetime": "2026-11-25T10:00:00+00:00",
           "commit": {"id": "b" * 40, "branch": "pr", "dirty": False}}
    base = {"gpu": "NVIDIA H200", "driver": "575.51.03", "datetime": "2026-11-20T10:00:00+00:00",
            "commit": {"id": "a" * 40, "branch": "main", "dirty": False}}
    note = " ".join(_environment_notes({"environment": run, "baseline_environment": base}))
    assert "driver: 575.51.03 → 580.65.06" in note
    assert "commit" not in note and "datetime" not in note and "2026" not in note


def test_without_a_gpu_driver_no_cuda_says_so_and_torch_decides_where_one_is(tmp_path, monkeypatch):
    monkeypatch.setattr(environment, "GPU_DRIVER_NODES", (str(tmp_path / "nvidia"), str(tmp_path / "kfd")))
    monkeypatch.setattr(sys, "platform", "linux")
    assert environment.no_cuda() == f"no GPU driver: {tmp_path / 'nvidia'} does not exist"
    (tmp_path / "kfd").touch()  # a driver: torch decides
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert environment.no_cuda() == "torch.cuda.is_available() is False"
    assert environment.visible_gpu() == "none visible (torch.cuda.is_available() is False)"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert environment.no_cuda() is None


@pytest.mark.skipif(sys.platform != "linux" or any(Path(n).exists() for n in environment.GPU_DRIVER_NODES),
                    reason="a machine without any GPU driver: where one is, torch decides")
def test_a_profiled_test_skipped_for_want_of_a_gpu_driver_never_imports_torch(pytester):
    """torch's import is about 3 s of CPU: a CPU-only CI's pytest --gpuprof pays it only where
    its own tests import torch."""
    pytester.makepyfile(test_one='''
        import sys
        import pytest

        @pytest.mark.gpuprof
        def test_profiled():
            pass

        def test_after():
            assert "torch" not in sys.modules
    ''')
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--gpuprof", "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*gpuprof: no CUDA GPU available (no GPU driver: /proc/driver/nvidia does not exist)"])
