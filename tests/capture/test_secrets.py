"""Nothing of the environment leaks through Nsight Systems reports: nsys records the
profiled processes' environments, so the session under it is launched without the
secret-looking variables, its SQLite export is scrubbed, and its files are deleted
unless kept.  Checked on the committed reports (tests/data/nsys), altered here."""

import dataclasses
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from helpers.nsys import executable, run, unpack
from pytest_gpuprof.capture.nsys import SCRUBBED, scrub_sqlite, split_environment
from pytest_gpuprof.cli.main import main
from pytest_gpuprof.errors import GpuprofError
from pytest_gpuprof.metrics.measure import measure
from pytest_gpuprof.trace.nsys_sqlite import load_nsys

WORKLOADS = ("overlap", "sync", "graph")
TOKEN = "ghp_" + "k3Jq9ZxT0aVbR7mW2eLs5NcY8uHd4FgP1oIt"  # shaped like a GitHub token
PROJECT = "/home/ci/secret-project"


def assert_same_trace(a, b):
    """The same events and metadata (``file`` says where each was read from)."""
    for field in (f for f in dataclasses.fields(a) if f.name != "file"):
        mine, theirs = getattr(a, field.name), getattr(b, field.name)
        if isinstance(mine, pd.DataFrame):
            pd.testing.assert_frame_equal(mine, theirs)
        else:
            assert mine == theirs, field.name


@pytest.mark.parametrize("workload", WORKLOADS)
def test_the_committed_reports_hold_no_environment(workload, tmp_path):
    path = unpack(workload, tmp_path)
    con = sqlite3.connect(path)
    con.text_factory = bytes
    assert con.execute("SELECT count(*) FROM META_DATA_CAPTURE WHERE name LIKE '%ENVIRONMENT%'").fetchone() == (0,)
    blocks = con.execute("SELECT count(*) FROM StringIds WHERE instr(value, char(0)) > 0").fetchone()
    assert blocks == (0,)  # an environment block is NAME=value strings separated by NULs
    machine = dict(con.execute("SELECT name, value FROM TARGET_INFO_SYSTEM_ENV WHERE name IN "
                               "('DeviceEnvironment', 'Hostname', 'GpuInfo', 'TargetInstallDir')"))
    assert set(machine.values()) == {SCRUBBED.encode()} and len(machine) == 4
    assert con.execute("SELECT uuid FROM TARGET_INFO_GPU").fetchall() == [(None,)]
    raw = path.read_bytes()
    # what the recording machine's environment held: CA bundles, its container, its checkout
    for leak in (b"ca-certificates.crt", b"CONTAINER_NAME", b"silent-green", b"/work/main", b"/root/out"):
        assert leak not in raw


def plant(path):
    """Put into a report what nsys records on a CI machine: the launch environment (rows and
    the machine's list), a child process's environment block, the machine's name, the
    GPU's UUID, the export's path, and a file name holding a value of the environment."""
    con = sqlite3.connect(path)
    capture = [("PROCESS_0:ENVIRONMENT_VARIABLE", f'MY_CI_TOKEN="{TOKEN}"'),
               ("PROCESS_0:ENVIRONMENT_VARIABLE", f'PROJECT_DIR="{PROJECT}"'),
               ("PROCESS_0:WORKING_DIR", PROJECT)]
    con.executemany("INSERT INTO META_DATA_CAPTURE (name, value) VALUES (?, ?)", capture)
    block = f"LANG=C.UTF-8\0MY_CI_TOKEN={TOKEN}\0PROJECT_DIR={PROJECT}\0"
    con.execute("INSERT INTO StringIds (id, value) VALUES ((SELECT max(id) + 1 FROM StringIds), ?)", (block,))
    con.execute("UPDATE TARGET_INFO_SYSTEM_ENV SET value = ? WHERE name = 'DeviceEnvironment'",
                (f"MY_CI_TOKEN={TOKEN};PROJECT_DIR={PROJECT};",))
    con.execute("UPDATE TARGET_INFO_SYSTEM_ENV SET value = 'ci-runner-42' WHERE name = 'Hostname'")
    con.execute("UPDATE TARGET_INFO_GPU SET uuid = 'GPU-5bd1c4e2-0f7a-4b7e-9d3e-2c1a8e6f9b10'")
    con.execute("UPDATE META_DATA_EXPORT SET value = ? WHERE name LIKE 'EXPORT_PARAM_OUTPUT_PATH%'",
                (f"{PROJECT}/.gpuprof/nsys/session.sqlite",))
    con.execute("INSERT INTO ANALYSIS_FILE (id, filename, contentId, globalPid) VALUES (9, ?, 0, 0)",
                ("/tmp/only-in-the-live-environment/out.log",))
    con.commit()
    con.close()


@pytest.mark.parametrize("workload", WORKLOADS)
def test_scrubbing_removes_what_nsys_recorded_and_keeps_the_trace(workload, tmp_path):
    original = unpack(workload, tmp_path)
    path = shutil.copy(original, tmp_path / "planted.sqlite")
    plant(path)
    kernel = load_nsys(original).kernels["name"].astype(str).iloc[0]
    # a live run also scrubs the values of its own environment; one of them here is part of a
    # kernel name, which the scrubber leaves as it is (the trace loader reads kernel names)
    done = scrub_sqlite(path, ["/tmp/only-in-the-live-environment", kernel[:12]])
    raw = path.read_bytes()
    for leak in (TOKEN, PROJECT, "ci-runner-42", "5bd1c4e2", "only-in-the-live-environment"):
        assert leak.encode() not in raw
    assert (done.environment_rows, done.environment_blocks, done.uuids) == (2, 1, 1)
    assert_same_trace(load_nsys(path), load_nsys(original))


def test_scrubbing_what_is_not_an_export_names_the_file(tmp_path):
    bad = tmp_path / "notes.sqlite"
    bad.write_text("not a database")
    with pytest.raises(GpuprofError, match="cannot scrub .*notes.sqlite"):
        scrub_sqlite(bad)


def test_secret_looking_variables_are_held_back_from_nsys():
    environ = {name: "x" for name in (
        "PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "LC_ALL", "CUDA_VISIBLE_DEVICES", "GPUPROF_NSYS_INNER",
        "MY_CI_TOKEN", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "PYTHON_KEYRING_PASSWORD", "CUDA_API_KEY",
        "DATABASE_URL", "CONTAINER_NAME")}
    launch, held = split_environment(environ)
    assert sorted(launch) == ["CUDA_VISIBLE_DEVICES", "GPUPROF_NSYS_INNER", "LC_ALL", "LD_LIBRARY_PATH",
                              "PATH", "PYTHONPATH"]
    assert sorted(held) == ["AWS_SECRET_ACCESS_KEY", "CONTAINER_NAME", "CUDA_API_KEY", "DATABASE_URL",
                            "GITHUB_TOKEN", "MY_CI_TOKEN", "PYTHON_KEYRING_PASSWORD"]


# Stands in for `nsys profile ... -o REPORT COMMAND...`: like nsys, it records the environment
# it was started with into the report, then runs COMMAND, which adds its own environment as
# it is when the test runs (real nsys records it when CUDA starts in the process, after the
# session under it got its held variables back: seen on an H200).
RECORDING_NSYS = textwrap.dedent("""\
    #!{python}
    import json, os, subprocess, sys
    args = sys.argv[1:]
    report = args[args.index("-o") + 1] + ".nsys-rep"
    with open(report, "w") as fh:
        json.dump(dict(os.environ), fh)
    sys.exit(subprocess.call(args[args.index("-o") + 2:], env={{**os.environ, "FAKE_NSYS_REPORT": report}}))
""")


@pytest.mark.parametrize("keep", [False, True])
def test_a_secret_reaches_the_tests_but_no_file_nsys_leaves(pytester, tmp_path, keep):
    pytester.makepyfile(test_suite=f"""
        import os

        def test_sees_the_token():
            assert os.environ["MY_CI_TOKEN"] == {TOKEN!r}
            with open(os.environ["FAKE_NSYS_REPORT"], "a") as report:  # what CUDA's start would record
                report.write(repr(dict(os.environ)))
    """)
    fake = executable(tmp_path / "bin" / "nsys", RECORDING_NSYS.format(python=sys.executable))
    private = tmp_path / "tmp"
    private.mkdir()
    done = run(pytester, fake, {"MY_CI_TOKEN": TOKEN, "TMPDIR": str(private)},
               *(["--gpuprof-keep-traces"] if keep else []))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
    left = [p for p in (pytester.path / ".gpuprof").rglob("*") if p.is_file()]
    assert all(TOKEN.encode() not in p.read_bytes() for p in left)
    reports = [p for p in left if p.suffix == ".nsys-rep"]
    assert len(reports) == int(keep)
    if keep:
        recorded = reports[0].read_text()
        assert "PATH" in recorded and "MY_CI_TOKEN" in recorded  # the stand-in did record the environments
        assert "*" * len(TOKEN) in recorded
        assert f"gpuprof: kept {reports[0]}, this session's environment values overwritten in it" in done.stdout
    assert os.listdir(private) == []  # the held variables' file is gone


# Stands in for `nsys export --type sqlite ... -o TARGET REPORT`: writes what nsys exports, an
# SQLite file holding the profiled process's environment (a committed report, planted).
EXPORTING_NSYS = textwrap.dedent("""\
    #!{python}
    import shutil, sys
    args = sys.argv[1:]
    assert args[:3] == ["export", "--type", "sqlite"], args
    target = args[args.index("-o") + 1]
    shutil.copy({planted!r}, target)
    with open({log!r}, "a") as log:
        log.write(target + "\\n")
""")


@pytest.mark.parametrize("command", ["analyze", "diff"])
def test_the_cli_reads_a_nsys_rep_through_an_export_it_deletes(command, tmp_path, monkeypatch, capsys):
    planted = unpack("sync", tmp_path)
    plant(planted)
    log = tmp_path / "exports.log"
    fake = executable(tmp_path / "bin" / "nsys",
                      EXPORTING_NSYS.format(python=sys.executable, planted=str(planted), log=str(log)))
    folder = tmp_path / "reports"
    folder.mkdir()
    report = folder / "session.nsys-rep"
    report.write_text("the report nsys exports")
    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    args = ["analyze", str(report), "--json"] if command == "analyze" else ["diff", str(report), str(report)]
    assert main([*args, "--nsys", str(fake)]) == 0
    out = capsys.readouterr().out
    if command == "analyze":
        assert json.loads(out)["metrics"] == json.loads(json.dumps(measure(load_nsys(planted)).metrics))
    exports = log.read_text().split()
    assert len(exports) == (1 if command == "analyze" else 2)
    assert all(Path(e).parent.parent == private and Path(e).name == "session.sqlite" for e in exports)
    assert os.listdir(folder) == ["session.nsys-rep"] and os.listdir(private) == []  # no export left anywhere
    assert TOKEN not in out


def test_an_export_the_cli_cannot_read_is_named_after_its_report(tmp_path, monkeypatch, capsys):
    broken = tmp_path / "broken.sqlite"
    broken.write_text("not a database")
    log = tmp_path / "exports.log"
    fake = executable(tmp_path / "bin" / "nsys",
                      EXPORTING_NSYS.format(python=sys.executable, planted=str(broken), log=str(log)))
    report = tmp_path / "session.nsys-rep"
    report.write_text("the report nsys exports")
    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    assert main(["analyze", str(report), "--nsys", str(fake)]) == 2
    err = capsys.readouterr().err
    assert f"{report}'s SQLite export is not a readable SQLite file: file is not a database" in err, err
    assert log.read_text().split()[0] not in err and os.listdir(private) == []  # the deleted export is not named
