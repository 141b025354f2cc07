"""Kernel names as reports show them: demangled, then shortened one way everywhere.

A profiler usually records a kernel's demangled signature, but not always (CUTLASS
kernels run by cuDNN keep their Itanium-mangled ``_Z...`` name, 1,600 characters);
either can run to thousands of characters of template arguments.  ``full_name`` is
the demangled name (shown on hover or click), ``short_name`` what a table or a
timeline prints: the function without its return type and parameters, the template
and parameter lists inside its own template arguments folded from the deepest level up
(``<…>``) until it fits, then cut in the middle.  Both are pure functions of the name,
so one kernel reads the same in the HTML report, the terminal and ``gpuprof diff``;
two kernels may read alike, which is why the full name stays one hover away.
Metrics, baselines and verdicts keep the recorded name.

LLVM's demangler (``pydemumble``): GNU ``c++filt`` and libstdc++'s ``__cxa_demangle``
both fail on the CUTLASS name of the example suite, and neither is on every machine.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import pydemumble

#: Characters of a short name; past it, after folding every list it may, the middle is cut.
SHORT_WIDTH = 120
_OPEN, _CLOSE = "<([{", ">)]}"
_FOLD = "…"
_ANONYMOUS = "(anonymous namespace)"


@lru_cache(maxsize=4096)
def full_name(name: str) -> str:
    """The demangled name (LLVM's demangler, as ``llvm-cxxfilt``); any other name as it is."""
    if not name.startswith("_Z"):
        return name
    return pydemumble.demangle(name) or name


@lru_cache(maxsize=4096)
def short_name(name: str, width: int = SHORT_WIDTH) -> str:
    """``void ns::k<A<B>, C>(int, P)`` -> ``ns::k<A<B>, C>``; while longer than ``width``,
    template and parameter lists inside it become ``…``, the deepest first (at the last
    level needed, the longest first); then the middle is cut."""
    text = full_name(name)
    depths = _depths(text)
    if depths is not None:
        text, depths = _function_only(text, depths)
        while len(text) > width:
            groups = _foldable(text, depths)
            if not groups:
                break
            level = max(d for d, _, _ in groups)
            spans = sorted(((a, b) for d, a, b in groups if d == level), key=lambda g: g[0] - g[1])
            need, chosen = len(text) - width, []
            for a, b in spans:  # the longest lists first, as many as it takes
                chosen.append((a, b))
                need -= b - a - 2
                if need <= 0:
                    break
            text, depths = _fold(text, depths, sorted(chosen))
    if len(text) <= width:
        return text
    head = (width - 1) * 2 // 3
    return text[:head] + _FOLD + text[len(text) - (width - 1 - head):]


def function_name(name: str) -> str:
    """A kernel's function alone, as ncu's ``-k`` matches it by default: the demangled name
    without return type, scope, template arguments and parameters
    (``void at::native::k<4, F>(int, F)`` -> ``k``); a name whose brackets do not balance as it is."""
    text = full_name(name)
    depths = _depths(text)
    if depths is None:
        return text
    text, depths = _function_only(text, depths)
    end = next((i for i, (c, d) in enumerate(zip(text, depths)) if c == "<" and d == 0), len(text))
    scopes = [i + 2 for i in range(end - 1) if text[i:i + 2] == "::" and depths[i] == 0]
    return text[scopes[-1] if scopes else 0:end]


def kernel_metric(metric: str) -> tuple[str, str] | None:
    """(NAME, the rest from its closing bracket: ``].count``, or ``]`` for a kernel new or
    vanished) of a per-kernel metric ``kernels[NAME]...``; None for any other metric (names
    may hold brackets and dots: the last ``]`` closes NAME)."""
    if not metric.startswith("kernels[") or "]" not in metric:
        return None
    end = metric.rindex("]")
    return metric[len("kernels["):end], metric[end:]


def in_metric(metric: str, show: Callable[[str], str] = short_name) -> str:
    """A per-kernel metric, ``kernels[NAME].count``, with NAME as ``show`` gives it; any
    other metric as it is."""
    found = kernel_metric(metric)
    return metric if found is None else f"kernels[{show(found[0])}{found[1]}"


def _depths(text: str) -> list[int] | None:
    """Each character's bracket depth (an opener and its closer at the outer depth), or
    None when the brackets do not balance (``operator<``, a cut name): then no folding."""
    out: list[int] = []
    stack: list[str] = []
    for c in text:
        if c in _OPEN:
            out.append(len(stack))
            stack.append(_CLOSE[_OPEN.index(c)])
        elif c in _CLOSE:
            if not stack or stack.pop() != c:
                return None
            out.append(len(stack))
        else:
            out.append(len(stack))
    return None if stack else out


def _function_only(text: str, depths: list[int]) -> tuple[str, list[int]]:
    """A signature less its parameter list and its return type; other names as they are."""
    if not text.endswith(")") or depths[-1] != 0:
        return text, depths
    start = max(i for i, (c, d) in enumerate(zip(text, depths)) if c == "(" and d == 0)
    if start == 0:
        return text, depths
    spaces = [i for i, (c, d) in enumerate(zip(text[:start], depths)) if c == " " and d == 0]
    first = spaces[-1] + 1 if spaces else 0
    return text[first:start], depths[first:start]


def _foldable(text: str, depths: list[int]) -> list[tuple[int, int, int]]:
    """(depth, opener index, closer index) of each template or parameter list that folding
    shortens: more than one character inside, and not ``(anonymous namespace)``."""
    out, open_at = [], {}
    for i, (c, d) in enumerate(zip(text, depths)):
        if c in "<(":
            open_at[d] = i
        elif c in ">)" and d in open_at and text[open_at[d]] == _OPEN[_CLOSE.index(c)]:
            a = open_at.pop(d)
            if d > 0 and i - a > 2 and text[a:i + 1] != _ANONYMOUS:
                out.append((d, a, i))
        elif c in "]}":
            open_at.pop(d, None)
    return out


def _fold(text: str, depths: list[int], spans: list[tuple[int, int]]) -> tuple[str, list[int]]:
    """``text`` with the inside of each (opener, closer) span, in order and disjoint, as ``…``."""
    out, kept, last = [], [], 0
    for a, b in spans:
        out += [text[last:a + 1], _FOLD]
        kept += depths[last:a + 1] + [depths[a] + 1]
        last = b
    out.append(text[last:])
    kept += depths[last:]
    return "".join(out), kept
