"""The package's layout: stages that import only the stages before them, no import
cycle, function-level imports only where they keep heavy modules out of a plain run."""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "pytest_gpuprof"

#: The pipeline, in order; a module may import its own stage and the stages before it.
STAGES = ("base", "capture", "trace", "metrics", "compare", "report", "run", "cli", "top")
#: Base modules every stage may use; the top is what pytest and ``python -m`` load.
BASE = {"pytest_gpuprof", "pytest_gpuprof.errors", "pytest_gpuprof.files", "pytest_gpuprof.numbers",
        "pytest_gpuprof.options"}
TOP = {"pytest_gpuprof.plugin", "pytest_gpuprof.hookspec", "pytest_gpuprof.__main__"}
#: Not every earlier stage: the commands run no pytest session.
FORBIDDEN = {"cli": {"run"}}
#: Imported inside functions on purpose: heavy, needed only once profiling is on, or an
#: optional dependency (ncu_report, extra "ncu").
HEAVY = ("torch", "nvtx", "pynvml", "ncu_report")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def stage(module: str) -> str:
    if module in BASE:
        return "base"
    if module in TOP:
        return "top"
    return module.split(".")[1]


def imports(module: str) -> list[tuple[str, bool]]:
    """(imported module, inside a function) for every import in the module's source."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    nested = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
              for n in ast.walk(f) if n is not f}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            names = [f"{base}.{a.name}" for a in node.names]
            out += [(n if n in MODULES else base, id(node) in nested) for n in names]
        elif isinstance(node, ast.Import):
            out += [(a.name, id(node) in nested) for a in node.names]
    return out


def test_every_module_imports_only_its_own_stage_and_earlier_ones():
    wrong = []
    for module in MODULES:
        mine = STAGES.index(stage(module))
        for target, _ in imports(module):
            if target in MODULES and (STAGES.index(stage(target)) > mine
                                      or stage(target) in FORBIDDEN.get(stage(module), ())):
                wrong.append(f"{module} ({stage(module)}) imports {target} ({stage(target)})")
    assert not wrong, "\n".join(wrong)


def test_no_import_cycle():
    graph = {m: {t for t, _ in imports(m) if t in MODULES and t != m and not m.startswith(t + ".")}
             for m in MODULES}
    state: dict[str, str] = {}

    def visit(m, path):
        state[m] = "open"
        for t in sorted(graph[m]):
            if state.get(t) == "open":
                raise AssertionError("import cycle: " + " -> ".join(path[path.index(t):] + [t]))
            if t not in state:
                visit(t, path + [t])
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])


def test_function_level_imports_only_keep_heavy_modules_out_of_plain_runs():
    """torch, nvtx, pynvml and ncu_report anywhere; the package's own heavy stages only from the plugin,
    which must not load pandas without --gpuprof."""
    wrong = []
    for module in MODULES:
        for target, nested in imports(module):
            if not nested or target.split(".")[0] in HEAVY:
                continue
            if module == "pytest_gpuprof.plugin" and target in MODULES:
                continue
            wrong.append(f"{module} imports {target} inside a function")
    assert not wrong, "\n".join(wrong)


PROBE = """
import importlib, json, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
print(json.dumps(sorted(m for m in sys.modules if m.startswith("pytest_gpuprof") or m.split(".")[0] in
                        ("torch", "pandas", "numpy", "nvtx"))))
"""


def loaded(*modules: str) -> list[str]:
    """The package modules (and heavy libraries) a fresh interpreter holds after importing these."""
    out = subprocess.run([sys.executable, "-c", PROBE, *modules], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


@pytest.mark.parametrize("name", STAGES)
def test_importing_a_stage_loads_no_later_stage(name):
    modules = [m for m in MODULES if stage(m) == name and m != "pytest_gpuprof.__main__"]
    later = [m for m in loaded(*modules) if m in MODULES and STAGES.index(stage(m)) > STAGES.index(name)]
    assert not later, f"importing the {name} stage loaded {later}"


def test_the_plugin_alone_loads_neither_torch_nor_pandas_nor_nvtx():
    heavy = [m for m in loaded("pytest_gpuprof.plugin") if m.split(".")[0] in ("torch", "pandas", "numpy", "nvtx")]
    assert not heavy, f"a plain pytest run would import {sorted({m.split('.')[0] for m in heavy})}"


def test_each_stage_package_says_what_it_may_import():
    for name in STAGES[1:-1]:
        doc = ast.get_docstring(ast.parse((PACKAGE / name / "__init__.py").read_text())) or ""
        assert "May import" in doc, f"pytest_gpuprof/{name}/__init__.py does not state its boundary"


def test_pytest_benchmark_is_an_optional_extra_never_imported():
    """pytest-benchmark's header line would show in every run of every suite that installs
    gpuprof were it a dependency; gpuprof only wraps its fixture where its plugin is loaded."""
    import tomllib

    project = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["project"]
    assert not [r for r in project["dependencies"] if r.startswith("pytest-benchmark")]
    assert project["optional-dependencies"]["benchmark"] == ["pytest-benchmark>=4.0"]
    assert "pytest-benchmark>=4.0" in project["optional-dependencies"]["test"]
    assert not [(m, t) for m in MODULES for t, _ in imports(m) if t.split(".")[0] == "pytest_benchmark"]
