"""The words a judgment ends in: each verdict's state and each test's status, as enums.

Both are ``StrEnum``: a member is its word, so the results document, every report and a
document read back carry the same strings as before, while the code names each state once.
"""

from __future__ import annotations

from enum import StrEnum


class State(StrEnum):
    """One verdict's outcome (``compare.verdict.Verdict.status``)."""

    OK = "ok"
    IMPROVED = "improved"
    REGRESSED = "regressed"
    CHANGED = "changed"  # a count or byte total that must match exactly did not
    THRESHOLD = "threshold"  # an absolute requirement broken
    NEW = "new"  # a kernel the baseline does not have
    VANISHED = "vanished"  # a kernel of the baseline this run does not have
    UNDECIDED = "undecided"  # too few steps for any p to get under the level
    UNSTABLE = "unstable"  # a time or ratio regression an unhealthy or slower machine explains
    UNCONFIRMED = "unconfirmed"  # a regression fresh processes did not reproduce (--gpuprof-confirm)
    SAME_AS_BASE = "same as base"  # head measured the same as the base revision alongside
    NOT_SURE = "not sure"  # the base revision's pairs could not tell


#: Verdict states that fail a test on their own.
FAILING = frozenset({State.REGRESSED, State.CHANGED, State.THRESHOLD})
#: Verdict states that fail a test: a new or vanished kernel too.
BROKEN = FAILING | {State.NEW, State.VANISHED}


class Status(StrEnum):
    """One test's word (``compare.evaluate.status_of``), in the order reports list them: what
    needs a reviewer first."""

    ERROR = "error"
    FAILED = "failed"
    NOT_SURE = "not sure"
    UNCONFIRMED = "unconfirmed"
    SAME_AS_BASE = "same as base"
    UNSTABLE = "unstable"
    UNDECIDED = "undecided"
    IMPROVED = "improved"
    NO_BASELINE = "no baseline"
    UPDATED = "updated"
    PASSED = "passed"


#: Every status in report order.
STATUSES = tuple(Status)
#: The statuses of a test that fail the pytest run.
FAILED_STATUSES = frozenset({Status.FAILED, Status.ERROR})

