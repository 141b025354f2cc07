"""Under the nsys backend, ``--gpuprof-confirm`` and ``--gpuprof-ncu`` did nothing and said
nothing (confirmation and Nsight Compute run beside torch.profiler only): each is now a usage
error naming both options, from the command line or an ini file.  The process ncu runs a test
in is itself a session inside nsys's role, and still starts whatever the user's ini file holds."""

import pytest

from pytest_gpuprof.run.role import INSIDE_NSYS, NCU_SIDE, SIDE

SUITE = "import pytest\n\n@pytest.mark.gpuprof\ndef test_profiled():\n    pass\n"
WHY = {"confirm": "the re-runs that confirm a failure measure with torch.profiler only",
       "ncu": "Nsight Compute runs beside torch.profiler only (nsys and ncu each take the GPU's profiling for "
              "themselves)"}


def refusal(name):
    return (f"ERROR: --gpuprof-{name} / ini key gpuprof_{name} under --gpuprof-nsys (or --gpuprof-backend=nsys): "
            f"{WHY[name]}, so it would do nothing; leave one of them out")


@pytest.mark.parametrize("args, ini, name", [
    (["--gpuprof-nsys", "--gpuprof-confirm=2"], "", "confirm"),
    (["--gpuprof", "--gpuprof-backend=nsys", "--gpuprof-confirm=1"], "", "confirm"),
    (["--gpuprof-nsys"], "gpuprof_confirm = 3", "confirm"),
    (["--gpuprof-nsys", "--gpuprof-ncu"], "", "ncu"),
    (["--gpuprof"], "gpuprof_backend = nsys\ngpuprof_ncu = true", "ncu"),
], ids=["confirm", "confirm-backend", "confirm-ini", "ncu", "ncu-ini"])
def test_confirm_and_ncu_under_nsys_are_usage_errors_naming_both_options(pytester, args, ini, name):
    pytester.makefile(".ini", pytest=f"[pytest]\n{ini}\n")
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert refusal(name) in result.errlines, result.errlines
    assert "re-running this session under Nsight Systems" not in result.stdout.str()


def test_confirm_zero_under_nsys_is_accepted_and_ncus_own_process_is_not_refused(pytester, monkeypatch):
    pytester.makefile(".ini", pytest="[pytest]\ngpuprof_ncu = true\n")
    pytester.makepyfile(test_suite=SUITE)
    # the process ncu runs the test in (run.kernel_profiling): --gpuprof-nsys, and the user's ini as it is
    monkeypatch.setenv(SIDE, NCU_SIDE)
    monkeypatch.setenv(INSIDE_NSYS, str(pytester.path / "inner.json"))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--gpuprof-nsys", "--gpuprof-confirm=0")
    assert result.ret != pytest.ExitCode.USAGE_ERROR, result.errlines
    assert not [line for line in result.errlines if "under --gpuprof-nsys" in line]
