"""The HTML report (``--gpuprof-html``): ``page`` turns the results document into what
the page shows (with ``gpu_timeline``, ``tables`` and the colour classes of ``classes``),
``templates/`` lays it out (jinja2, autoescaped) with its stylesheet and
the timeline's script inlined: the file needs no network."""

from .page import render_html, write_html

__all__ = ["render_html", "write_html"]
