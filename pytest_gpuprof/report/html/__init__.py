"""The HTML report (``--gpuprof-html``): ``page`` lays out the results document,
``svg`` draws its timelines and bars, ``style.css`` styles it (inlined: the file
needs no network)."""

from .page import render_html, write_html

__all__ = ["render_html", "write_html"]
