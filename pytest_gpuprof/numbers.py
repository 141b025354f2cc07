"""How every number is printed: in rules, verdicts, reports and the terminal.

A metric's value is shown in the unit its magnitude calls for, to ``SIGNIFICANT`` digits
(``format_quantity``: one function per kind of quantity); the results document keeps the
raw numbers.  ``format_number`` prints a plain number (a p-value, a threshold as written,
a JUnit property) as it is.
"""

from __future__ import annotations

import math

#: Significant digits of a value shown in a unit chosen by its magnitude.
SIGNIFICANT = 4
#: Decimals of a time in microseconds: traces resolve 1 ns, no finer digit is real.
US_DECIMALS = 3
#: Time units by size in microseconds, largest first.
TIME_UNITS = ((1e6, "s"), (1e3, "ms"), (1.0, "µs"))
#: Byte units by size, largest first (binary: what memory sizes are counted in).
BYTE_UNITS = ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"), (1, "B"))
#: A ratio's change, in percentage points.
POINTS = "pp"


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


def _significant(value: float, signed: bool = False, most_decimals: int | None = None) -> str:
    """``value`` to ``SIGNIFICANT`` significant digits (at most ``most_decimals`` decimals),
    trailing zeros dropped: 14.8214 -> ``14.82``, 300.77 -> ``300.8``, 12.0 -> ``12``."""
    sign = "+" if signed else ""
    if value == 0:
        return f"{sign}0"
    decimals = max(0, SIGNIFICANT - 1 - math.floor(math.log10(abs(value))))
    if most_decimals is not None:
        decimals = min(decimals, most_decimals)
    text = f"{value:{sign}.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return f"{sign}0" if text.lstrip("+-") == "0" else text


def _scaled(value: float, units: tuple[tuple[float, str], ...]) -> tuple[float, str]:
    """The largest unit that ``value`` rounded to ``SIGNIFICANT`` digits fills at least once
    (so 999.96 us is 1 ms, not 1000 µs); the last unit for smaller values."""
    magnitude = abs(value)
    for size, name in units:
        if float(f"{magnitude / size:.{SIGNIFICANT}g}") >= 1:
            return size, name
    return units[-1]


def format_time_us(us: float, signed: bool = False) -> str:
    """A time given in microseconds, in µs, ms or s by its size: 14821.444 -> ``14.82 ms``."""
    size, unit = _scaled(us, TIME_UNITS)
    return f"{_significant(us / size, signed, US_DECIMALS + round(math.log10(size)))} {unit}"


def format_bytes(count: float, signed: bool = False) -> str:
    """A byte count in B, KiB, MiB, GiB or TiB by its size: 315382784 -> ``300.8 MiB``."""
    size, unit = _scaled(count, BYTE_UNITS)
    return f"{format_count(count, signed) if size == 1 else _significant(count / size, signed)} {unit}"


def format_count(count: float, signed: bool = False) -> str:
    """A count: an integer as it is (``+64``); a mean per step that is not one (total / steps) to
    ``SIGNIFICANT`` digits, 3 decimals at most (``2.667``)."""
    if float(count).is_integer():
        return f"{int(count):{'+' if signed else ''}d}"
    return _significant(count, signed, 3)


def format_ratio(ratio: float) -> str:
    """A ratio (a fraction of 1) as a percentage: 0.755841 -> ``75.6%``."""
    return f"{ratio:.1%}"


def format_points(delta: float) -> str:
    """A ratio's change in percentage points: -0.227038 -> ``-22.7 pp``."""
    return f"{delta * 100:+.1f} {POINTS}"


def format_percent(percent: float) -> str:
    """A value already in percent (a counter's percentage of peak): 45.21 -> ``45.21%``."""
    return f"{_significant(percent, most_decimals=2)}%"


def format_rate(gbps: float, signed: bool = False) -> str:
    """A bandwidth in GB/s: 23.4567 -> ``23.46 GB/s``."""
    return f"{_significant(gbps, signed)} GB/s"


def format_quantity(value: float | None, kind: str, unit: str = "", signed: bool = False) -> str:
    """A metric's value (``metrics.specs.MetricSpec``'s ``kind`` and ``unit``) as every report
    shows it: times, bytes and rates by their unit, ratios as percentages, percentages of peak
    with ``%``, counts as counts; None is ``n/a``.  ``signed``: a difference, a ratio's or a
    percentage's in percentage points."""
    if value is None:
        return "n/a"
    if unit == "us":
        return format_time_us(value, signed)
    if unit == "B":
        return format_bytes(value, signed)
    if unit == "GB/s":
        return format_rate(value, signed)
    if unit == "%":
        return format_points(value / 100) if signed else format_percent(value)
    if kind == "ratio":
        return format_points(value) if signed else format_ratio(value)
    return format_count(value, signed)


def format_change(now: float, before: float, kind: str, unit: str = "", relative: bool | None = None) -> str:
    """The change from ``before`` to ``now`` of a metric (its spec's ``kind`` and ``unit``): in
    percent when ``relative`` (by default all but ratios and percentages) and ``before`` is not
    0, else as a signed difference in its unit (``+8``, ``+1.2 ms``, ``-22.7 pp``)."""
    if relative is None:
        relative = kind not in ("ratio", "percent")
    if relative and before:
        return f"{(now - before) / abs(before):+.1%}"
    return format_quantity(now - before, kind, unit, signed=True)
