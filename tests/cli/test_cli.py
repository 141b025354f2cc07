"""``gpuprof analyze``: the metrics JSON and the table, as a user runs them."""

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).parents[1] / "data"
METRIC_KEYS = (
    ["kernel_count", "kernel_time_us", "kernels"]
    + [f"memcpy_{k}_{w}" for k in ("htod", "dtoh", "dtod", "ptop") for w in ("count", "bytes", "time_us", "gbps")]
    + ["memset_count", "gpu_utilization", "copy_utilization", "pcie_utilization", "overlap_efficiency", "sync_count",
       "sync_wait_fraction", "window_us", "comm_kernel_count", "comm_time_us", "comm_compute_overlap",
       "exposed_comm_us", "collectives", "launch_call_us", "step_count", "step_gpu_time_us",
       "peak_memory_allocated_bytes"]
)


def run(*args):
    return subprocess.run([sys.executable, "-m", "pytest_gpuprof", *args], capture_output=True, text=True)


def test_json_has_exactly_the_documented_metric_keys():
    out = run("analyze", str(DATA / "sync.pt.trace.json.gz"), "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert sorted(doc["metrics"]) == sorted(METRIC_KEYS)
    assert doc["gpu"] == "NVIDIA H200"
    assert doc["steps"] == {"source": "ProfilerStep#N", "count": 4}
    assert doc["per_step"]["sync_count"] == [2, 2, 2, 2]


def test_metric_keys_are_documented():
    doc = (Path(__file__).parents[2] / "docs" / "metrics.md").read_text()
    missing = [k for k in METRIC_KEYS if f"`{k}`" not in doc]
    assert not missing, f"not defined in docs/metrics.md: {missing}"


def test_table_names_the_trace_and_the_key_numbers():
    out = run("analyze", str(DATA / "overlap.pt.trace.json.gz"))
    assert out.returncode == 0, out.stderr
    assert "steps: 4 (from ProfilerStep#N)" in out.stdout
    assert "64 MiB" in out.stdout  # 4 steps x 16 MiB host-to-device: 67108864 B
    assert "overlap_efficiency" in out.stdout


def test_table_shows_per_step_values_as_judged_beside_the_totals():
    """Per step as a verdict judges it (counts: total / steps; times and ratios: the median
    step, worked out here from the per-step samples), then the total over all steps, under
    headers that say which is which."""
    trace = str(Path(__file__).parents[2] / "example_suite" / "traces"
                / "example_suite_test_weight_streaming.py_test_weight_streaming.pt.trace.json.gz")
    doc = json.loads(run("analyze", trace, "--json").stdout)
    m, per_step, n = doc["metrics"], doc["per_step"], doc["metrics"]["step_count"]
    lines = run("analyze", trace).stdout.splitlines()
    assert f"{'':<18} {'per step':<45}   | total over {n} steps" in lines
    kernels = next(line for line in lines if line.startswith("kernels "))
    per, total = kernels.split("|")
    median = statistics.median(per_step["kernel_time_us"])
    # both over 1000 us and under a second: in ms, to 4 significant digits
    assert 1000 <= median < m["kernel_time_us"] < 1e6
    assert per.split() == ["kernels", str(m["kernel_count"] // n), f"{median / 1000:.4g}", "ms"]
    assert total.split() == [str(m["kernel_count"]), f"{m['kernel_time_us'] / 1000:.4g}", "ms"]
    assert median != pytest.approx(m["kernel_time_us"] / n, abs=1)  # the two numbers differ on this trace
    util = next(line for line in lines if line.startswith("gpu_utilization "))
    assert util.split()[1] == f"{statistics.median(per_step['gpu_utilization']):.1%}"
    assert util.split()[2] == f"{m['gpu_utilization']:.1%}"


def test_console_script_is_installed():
    exe = Path(sys.executable).with_name("gpuprof")
    out = subprocess.run([str(exe), "analyze", str(DATA / "sync.pt.trace.json.gz"), "--json"],
                         capture_output=True, text=True)
    assert out.returncode == 0 and json.loads(out.stdout)["metrics"]["sync_count"] == 8


@pytest.mark.parametrize("content", ["{broken", ""])
def test_bad_trace_is_a_one_line_error_naming_the_file(tmp_path, content):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    out = run("analyze", str(bad))
    assert out.returncode == 2
    assert out.stderr.startswith("gpuprof: ") and str(bad) in out.stderr and "Traceback" not in out.stderr


def test_analyze_never_imports_torch():
    code = ("import sys; from pytest_gpuprof.cli.main import main; main(['analyze', sys.argv[1], '--json']); "
            "sys.stderr.write(str('torch' in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code, str(DATA / "sync.pt.trace.json.gz")],
                         capture_output=True, text=True)
    assert out.stderr.strip() == "False"


def test_the_cli_package_docstring_names_every_command(capsys):
    import pytest_gpuprof.cli
    from pytest_gpuprof.cli.main import main

    with pytest.raises(SystemExit):
        main(["--help"])
    commands = capsys.readouterr().out.split("{", 1)[1].split("}", 1)[0].split(",")
    assert commands == ["analyze", "diff", "merge"]
    assert all(f"``gpuprof {command}``" in pytest_gpuprof.cli.__doc__ for command in commands)
