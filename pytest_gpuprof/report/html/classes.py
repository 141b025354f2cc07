"""The page's colour classes of statuses and verdicts, and the colours behind them: one
class and one colour mean one thing wherever the page shows a verdict."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...compare.status import BROKEN

#: Colours of test statuses and verdicts (the failure colour is the one tests look for).
STATUS_COLORS = {
    "error": "#8e0000",
    "failed": "#c62828",
    "unstable": "#ad1457",
    "undecided": "#6d4c41",
    "improved": "#00838f",
    "no baseline": "#ef6c00",
    "updated": "#1565c0",
    "passed": "#2e7d32",
    "skipped": "#757575",
}
FAIL_COLOR = STATUS_COLORS["failed"]
VERDICT_COLORS = {
    "fail": FAIL_COLOR, "improved": STATUS_COLORS["improved"], "undecided": STATUS_COLORS["undecided"],
    "let-through": "#f9a825", "ok": "#78909c", "reported": "#b0bec5",
}
#: Verdict classes of rows a reader need not see first: folded under one ``<details>``.
QUIET_CLASSES = ("ok", "reported")


def failing(status: str) -> bool:
    """Whether a verdict's status broke (``compare.status.BROKEN``)."""
    return status in BROKEN


def verdict_class(status: str | None) -> str:
    if status is None:
        return "reported"
    if failing(status):
        return "fail"
    return status if status in ("improved", "undecided") else "ok"


def class_of(v: Mapping[str, Any]) -> str:
    """A verdict's colour class: as its status's, or ``let-through`` for an ok that let a
    change beyond its tolerance through (``words.verdict_state`` says why)."""
    return "let-through" if v.get("let_through") else verdict_class(v["status"])
