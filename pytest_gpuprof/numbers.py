"""How every metric value is printed: in rules, verdicts, reports and the terminal."""

from __future__ import annotations


def format_number(value: float | None, signed: bool = False) -> str:
    """Integers as integers, magnitudes under 1 (ratios) to 6 decimals, the rest
    (microseconds, per-step means) to 3 (1 ns); None is "n/a"."""
    if value is None:
        return "n/a"
    sign = "+" if signed else ""
    if float(value).is_integer():
        return f"{int(value):{sign}d}"
    text = f"{value:{sign}.{6 if abs(value) < 1 else 3}f}".rstrip("0").rstrip(".")
    return text if text not in ("+0", "-0", "") else "0"


def format_change(now: float, before: float, relative: bool) -> str:
    """The change from ``before`` to ``now``: in percent when ``relative`` and ``before`` is
    not 0, else as a signed difference (ratios, and changes from zero)."""
    if relative and before:
        return f"{(now - before) / abs(before):+.1%}"
    return format_number(now - before, signed=True)
