"""Text that came from a trace or a file (kernel and GPU names, node ids, messages) made
safe for each kind of output: the one place where reports escape.

A kernel name is whatever the program called its kernel and a GPU name whatever the
driver or a trace says: either can carry terminal escape sequences, Markdown syntax or
HTML.  Every report passes such text through the function of its output kind.
"""

from __future__ import annotations

import html
import re
import unicodedata
from typing import Any

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]#!~|])")


def visible(text: Any) -> str:
    """``text`` with every character a terminal or an editor would not print as itself
    (control characters, escape sequences' ESC, line breaks, bidirectional overrides)
    written as its Python escape, e.g. ``\\x1b``: one line that shows what it holds."""
    text = str(text)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def shown_lines(text: str) -> str:
    """``text`` with its control and format characters (an ESC or a NUL in a kernel name, a
    bidirectional override) and line separators but tab and line feed written as ``visible``
    writes them: what a page shows of it, which no report holds raw."""
    if text.replace("\n", "").replace("\t", "").isprintable():
        return text
    return "".join(c.encode("unicode_escape").decode("ascii") if c not in "\n\t" and
                   unicodedata.category(c) in _UNSHOWN else c for c in text)


#: Unicode categories a page writes as escapes: control, format, surrogate, private use,
#: unassigned, line and paragraph separators.
_UNSHOWN = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def terminal_text(text: Any) -> str:
    """A line for the terminal: nothing that moves the cursor, recolours or rewrites it."""
    return visible(text)


def markdown_text(text: Any) -> str:
    """Plain text in Markdown, also in a table cell: one line; what would make emphasis,
    a link or image, a heading, code or a cell border backslash-escaped; no HTML tags or
    entities."""
    escaped = _MARKDOWN_SPECIAL.sub(r"\\\1", visible(text))
    return escaped.replace("&", "&amp;").replace("<", "&lt;")


def markdown_code(text: Any) -> str:
    """Inline code that survives a table cell: one line, pipes escaped, a fence longer
    than any run of backticks in it."""
    text = visible(text).replace("|", "\\|")
    fence = "`"
    while fence in text:
        fence += "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def markdown_block(text: Any, info: str = "text") -> list[str]:
    """``text`` as a fenced code block of one ``visible`` line, with a fence longer than
    any run of backticks in it, so nothing in it can close the block."""
    line = visible(text)
    fence = "`" * max(3, max((len(run) for run in re.findall(r"`+", line)), default=0) + 1)
    return [f"{fence}{info}", line, fence]


def html_text(text: Any) -> str:
    """Text in HTML, in an element or a quoted attribute; None is empty."""
    return html.escape("" if text is None else str(text), quote=True)
