"""A report's folded tests: their details as the page stores them (``page.packed``: the markup
compressed, in base64, the text of a ``<script type="application/zlib" class="folded-body">``),
read back here with the standard library alone; and, in headless Chromium, unfolded and waited
for (the page unpacks them asynchronously)."""

from __future__ import annotations

import base64
import re
import zlib
from pathlib import Path

from helpers.browser import Browser

#: A folded test's stored details: the script element and its base64 text.
FOLDED = re.compile(r'<script type="application/zlib" class="folded-body">([A-Za-z0-9+/=]*)</script>')


def stored(page: str) -> list[str]:
    """Each folded test's details as the markup the page will build, in the page's order."""
    return [_unpack(m.group(1)) for m in FOLDED.finditer(page)]


def unfolded(page: str) -> str:
    """The page with each folded test's details in place of the script element that stores them,
    as the browser holds it once every test is unfolded (the markup a static check reads)."""
    return FOLDED.sub(lambda m: _unpack(m.group(1)), page)


def read_page(path: Path) -> str:
    """A report written to ``path``, each folded test's details in place (``unfolded``)."""
    return unfolded(Path(path).read_text())


def _unpack(text: str) -> str:
    return zlib.decompress(base64.b64decode(text, validate=True)).decode("utf-8")


def wait_built(browser: Browser, scope: str = "document", seconds: float = 30) -> None:
    """Waits until each test opened in ``scope`` (a JavaScript expression: the document, a
    section) has its details built: none of its open folds still holds them stored."""
    browser.evaluate(f"""new Promise((done, fail) => {{
        const start = performance.now();
        (function check() {{
            if (!({scope}).querySelector('details[open] > script.folded-body')) done(true);
            else if (performance.now() - start > {seconds * 1000}) fail(new Error('not built in {seconds} s'));
            else setTimeout(check, 5);
        }})();
    }})""")


def unfold_all(browser: Browser) -> None:
    """Opens every fold of the page: each test's (waiting until its details are built), then
    the folds those details hold."""
    browser.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
    wait_built(browser)
    browser.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
