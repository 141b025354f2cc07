"""A composite action's steps run as a GitHub runner runs them, on this machine: in order,
each ``if:`` judged (a step without a status function runs only while every step before
it succeeded), ``${{ }}`` expressions evaluated over the inputs (their defaults included),
``github``, ``steps`` and ``env``, each ``run:`` under ``bash --noprofile --norc -eo
pipefail`` in the workspace with its ``env:``, GITHUB_ENV's and GITHUB_OUTPUT's lines
carried to the next steps, and the runner's variables set (GITHUB_ACTION_PATH,
RUNNER_TEMP, GITHUB_STEP_SUMMARY, ...).

A step this machine cannot run (a ``uses:`` step, or one needing a GPU) is run only by a
substitute the caller names by the step's ``uses`` or ``id``; a step that would run and
has none fails the run, so that no step is skipped unawares.

The expressions understood are those action.yml uses: property paths, string literals,
``==``, ``!=``, ``&&``, ``||``, ``!``, parentheses and the status functions.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

EXPRESSION = re.compile(r"\$\{\{(.*?)\}\}", re.S)
STRING = re.compile(r"'(?:[^']|'')*'")
PATH = re.compile(r"(?<![\w.'-])([A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*)*)(?=\s*(\()?)")
STATUS_FUNCTIONS = ("always", "success", "failure", "cancelled")

#: A substitute gets the step (its ``with:`` evaluated), the step's environment, and returns
#: the step's outputs; it raises to fail the step.
Substitute = Callable[[dict, dict[str, str]], Mapping[str, str]]


@dataclass
class StepRun:
    name: str
    ran: bool
    returncode: int = 0
    output: str = ""


@dataclass
class ActionRun:
    steps: list[StepRun] = field(default_factory=list)

    @property
    def succeeded(self) -> bool:
        return all(step.returncode == 0 for step in self.steps)

    def step(self, name: str) -> StepRun:
        (found,) = [s for s in self.steps if s.name == name]
        return found

    @property
    def log(self) -> str:
        return "\n".join(f"--- {s.name} ({'rc ' + str(s.returncode) if s.ran else 'skipped'})\n{s.output}"
                         for s in self.steps)


def _lookup(context: Mapping[str, Any], path: str) -> Any:
    value: Any = context
    for part in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def evaluate(expression: str, context: Mapping[str, Any], failed: bool = False) -> Any:
    """One expression's value, GitHub's way: a missing property is null, ``||`` and ``&&``
    give an operand."""
    strings: list[str] = []

    def keep(match: re.Match) -> str:
        strings.append(match.group(0)[1:-1].replace("''", "'"))
        return f" _s[{len(strings) - 1}] "

    code = STRING.sub(keep, expression)
    unknown = set(re.findall(r"[^\w\s.'()=!&|\[\]-]", code))
    if unknown:
        raise ValueError(f"expression {expression!r}: {sorted(unknown)} not understood here")
    code = code.replace("!=", " _ne_ ").replace("&&", " and ").replace("||", " or ").replace("!", " not ")
    code = code.replace("_ne_", "!=")
    names: dict[str, Any] = {"_s": strings, "_v": lambda path: _lookup(context, path),
                             "always": lambda: True, "success": lambda: not failed,
                             "failure": lambda: failed, "cancelled": lambda: False}

    def path(match: re.Match) -> str:
        word, call = match.group(1), match.group(2)
        if word in ("and", "or", "not", "_s"):
            return word
        if call:
            if word not in STATUS_FUNCTIONS:
                raise ValueError(f"expression {expression!r}: function {word} not understood here")
            return word
        if word in ("true", "false", "null"):
            return {"true": "True", "false": "False", "null": "None"}[word]
        return f"_v({word!r})"

    return eval(PATH.sub(path, code), {"__builtins__": {}}, names)


def substitute(text: Any, context: Mapping[str, Any]) -> Any:
    """A value with its ``${{ }}`` expressions replaced, as GitHub does in ``with:``, ``env:``
    and inputs' defaults."""
    if not isinstance(text, str):
        return text

    def one(match: re.Match) -> str:
        value = evaluate(match.group(1), context)
        return "" if value is None else str(value).lower() if isinstance(value, bool) else str(value)

    return EXPRESSION.sub(one, text)


def runs_when(step: dict, context: Mapping[str, Any], failed: bool) -> bool:
    condition = str(step.get("if", "success()"))
    match = EXPRESSION.fullmatch(condition.strip())
    condition = match.group(1) if match else condition
    if not any(re.search(rf"\b{f}\s*\(", condition) for f in STATUS_FUNCTIONS):
        condition = f"success() && ({condition})"
    return bool(evaluate(condition, context, failed))


def read_commands_file(path: Path) -> dict[str, str]:
    """GITHUB_ENV's or GITHUB_OUTPUT's ``NAME=value`` lines."""
    values = {}
    for line in path.read_text().splitlines():
        name, sep, value = line.partition("=")
        if not sep or "<<" in name:
            raise ValueError(f"{path.name}: line {line!r} is not NAME=value")
        values[name] = value
    return values


def run_action(action: dict, inputs: Mapping[str, str], *, github: Mapping[str, Any], env: Mapping[str, str],
               workspace: Path, temp: Path, substitutes: Mapping[str, Substitute]) -> ActionRun:
    """The composite action's steps, as the runner would run them for a ``uses:`` step with
    ``with: inputs``; ``env`` is the job's environment (GITHUB_* of ``github`` added)."""
    declared = action["inputs"]
    unknown = set(inputs) - set(declared)
    if unknown:
        raise ValueError(f"inputs not declared in action.yml: {sorted(unknown)}")
    missing = [n for n, spec in declared.items() if spec.get("required") and n not in inputs]
    if missing:
        raise ValueError(f"required inputs not given: {missing}")
    context: dict[str, Any] = {"github": dict(github), "steps": {}, "env": dict(env)}
    context["inputs"] = {n: inputs[n] if n in inputs else substitute(spec.get("default", ""), context)
                         for n, spec in declared.items()}
    temp.mkdir(parents=True, exist_ok=True)
    files = {name: temp / name.lower() for name in ("GITHUB_ENV", "GITHUB_STEP_SUMMARY", "GITHUB_PATH")}
    for path in files.values():
        path.touch()
    run = ActionRun()
    failed = False
    for number, step in enumerate(action["runs"]["steps"]):
        name = step.get("name") or step.get("uses") or f"step {number}"
        context["env"] = {**env, **read_commands_file(files["GITHUB_ENV"])}
        if not runs_when(step, context, failed):
            run.steps.append(StepRun(name, ran=False))
            continue
        output_file = temp / f"output-{number}"
        output_file.write_text("")
        step_env = {**context["env"], **{k: str(substitute(v, context)) for k, v in (step.get("env") or {}).items()},
                    **{k: str(v) for k, v in files.items()}, "GITHUB_OUTPUT": str(output_file),
                    "GITHUB_ACTION_PATH": str(github["action_path"]), "GITHUB_WORKSPACE": str(workspace),
                    "RUNNER_TEMP": str(temp)}
        stand_in = substitutes.get(step.get("id", "")) or substitutes.get(str(step.get("uses", "")))
        if stand_in is not None:
            evaluated = {**step, "with": {k: substitute(v, context) for k, v in (step.get("with") or {}).items()}}
            try:
                outputs, code, output = dict(stand_in(evaluated, step_env)), 0, "(substituted)"
            except Exception as error:  # the substitute's failure is the step's
                outputs, code, output = {}, 1, f"(substituted) {error}"
        elif "run" in step:
            if step.get("shell") != "bash":
                raise ValueError(f"step {name!r}: shell {step.get('shell')!r}, only bash is run here")
            done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
                                  cwd=workspace, env=step_env, capture_output=True, text=True, timeout=300)
            outputs, code, output = read_commands_file(output_file), done.returncode, done.stdout + done.stderr
        else:
            raise ValueError(f"step {name!r} ({step.get('uses')}) would run and has no substitute")
        if "id" in step:
            context["steps"][step["id"]] = {"outputs": outputs, "outcome": "success" if code == 0 else "failure"}
        run.steps.append(StepRun(name, ran=True, returncode=code, output=output))
        failed = failed or code != 0
    return run


#: An action/ script a step's run: calls
LOCAL_SCRIPT = re.compile(r'"\$GITHUB_ACTION_PATH/(action/[\w.-]+)"')


def action_steps(action: dict, given: Mapping[str, str], github: Mapping[str, Any],
                 read: Callable[[str], str]) -> list[dict]:
    """The steps of ``action`` that run with the inputs ``given`` (its defaults for the others)
    on the event ``github`` describes while every step succeeds, as a workflow's steps read:
    each ``run:`` followed by the text of the action/ scripts it calls (``read`` gives a
    script's text by its path in the repository), each ``if:`` kept where it names a status
    function (``always()``, ``!cancelled()``), dropped where it was only about the inputs or
    the event."""
    inputs = {n: str(given.get(n, spec.get("default", ""))) for n, spec in action["inputs"].items()}
    context = {"inputs": inputs, "github": dict(github), "steps": {}}
    steps = []
    for step in action["runs"]["steps"]:
        if not runs_when(step, context, failed=False):
            continue
        step = dict(step)
        if not re.search(r"always\(\)|cancelled\(\)", str(step.get("if", ""))):
            step.pop("if", None)
        if "run" in step:
            step["run"] = "\n".join([step["run"], *map(read, LOCAL_SCRIPT.findall(step["run"]))])
        steps.append(step)
    return steps


def upload_artifact(checkout: Path, paths: list[str], artifact: Path) -> None:
    """What actions/upload-artifact stores of ``paths``: every file under the least common
    ancestor of its search paths (a file's is its folder), at its path below it."""
    found = [checkout / p.rstrip("/") for p in paths]
    root = Path(os.path.commonpath([p if p.is_dir() else p.parent for p in found if p.exists()]))
    for path in found:
        if path.is_dir():
            shutil.copytree(path, artifact / path.relative_to(root), dirs_exist_ok=True)
        elif path.exists():
            (artifact / path.relative_to(root)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, artifact / path.relative_to(root))
