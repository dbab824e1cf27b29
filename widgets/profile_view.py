"""ProfileView: the top of a profile's table, and its trace in speedscope, offline.

    prof = ...                                  # a finished tg.profiler.profile
    tg.widgets.ProfileView(prof)                # the table (sortable) + the trace viewer
    tg.widgets.profile_view.write_viewer(prof.chrome_trace(), "step.html")  # a page to open

The viewer is speedscope (MIT), vendored from npm in ``widgets/vendor/speedscope/`` by
``scripts/vendor_speedscope.sh``. speedscope reads Chrome's Trace Event Format, the
format ``prof.export_chrome_trace`` writes. :func:`viewer_page` makes one self-contained
HTML page of it: speedscope's script, stylesheet and font inlined, the trace inside the
page (base64). A script in the page hands the trace to speedscope the way speedscope's own
command line does, so nothing is fetched from a server or the network: the page works in
an ``<iframe srcdoc>`` in JupyterLab, in the built book and from a file.

Each host thread and each device stream is one of speedscope's profiles (the menu at
the top picks one); "Time Order" draws the ops nested in their regions as the trace
has them, "Sandwich" lists every name with its total and self time.
"""
from __future__ import annotations

import base64
import html
import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import ipywidgets as widgets

VENDOR = Path(__file__).resolve().parent / "vendor" / "speedscope"
VIEWS = ("time-ordered", "left-heavy", "sandwich")
SORT_KEYS = ("self_cpu_time_total", "cpu_time_total", "self_cuda_time_total", "cuda_time_total",
             "count")


@lru_cache(maxsize=1)
def _speedscope() -> tuple[str, str]:
    """speedscope's script and stylesheet, the font inlined into the stylesheet."""
    script = next(VENDOR.glob("speedscope-*.js")).read_text()
    css = next(VENDOR.glob("speedscope-*.css")).read_text()
    font = next(VENDOR.glob("SourceCodePro-*.woff2"))
    data = "data:font/woff2;base64," + base64.b64encode(font.read_bytes()).decode()
    css = re.sub(r'url\("\./SourceCodePro-[^"]+\.woff2"\)', f'url("{data}")', css)
    return script, css


def _trace_dict(trace: Any) -> dict:
    """A trace as a dict: from a profile, a dict, or the path of an exported trace file."""
    if hasattr(trace, "chrome_trace"):
        return trace.chrome_trace()
    if isinstance(trace, (str, Path)):
        trace = json.loads(Path(trace).read_text())
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        raise TypeError("give a tg.profiler.profile, a Chrome trace dict with a 'traceEvents' list, "
                        f"or the path of a trace exported by export_chrome_trace; got {type(trace).__name__}")
    return trace


def viewer_page(trace: Any, title: str = "teachgrad trace", view: str = "time-ordered") -> str:
    """One HTML page, needing nothing else, that shows ``trace`` in speedscope."""
    if view not in VIEWS:
        raise ValueError(f"view must be one of {', '.join(VIEWS)}, got {view!r}")
    script, css = _speedscope()
    data = base64.b64encode(json.dumps(_trace_dict(trace)).encode()).decode()
    # speedscope loads a profile from a server address (profileURL: only on http pages, not
    # in a file or an <iframe srcdoc>) or, as its command line does, from a script at a
    # local path (localProfilePath) that calls speedscope.loadFileFromBase64. This page
    # asks for the second and answers the request itself instead of letting the browser
    # look for a file: the trace is already in the page.
    start = f"""
var teachgradTrace = "{data}";
var append = document.head.appendChild.bind(document.head);
document.head.appendChild = function (node) {{
  if (node.tagName === "SCRIPT" && node.src === "file:///teachgrad-trace") {{
    document.head.appendChild = append;
    setTimeout(function () {{ window.speedscope.loadFileFromBase64({json.dumps(title)}, teachgradTrace); }}, 0);
    return node;
  }}
  return append(node);
}};
var hash = "#localProfilePath=teachgrad-trace&view={view}";
try {{ history.replaceState(null, "", hash); }} catch (e) {{ location.hash = hash; }}
"""
    return (f'<!DOCTYPE html><html><head><meta charset="UTF-8"><title>{html.escape(title)}</title>'
            f"<style>{css}</style></head><body>"
            f"<script>{start}</script><script>{script}</script></body></html>")


def write_viewer(trace: Any, path: str | Path, title: str | None = None,
                 view: str = "time-ordered") -> Path:
    """Write :func:`viewer_page` to ``path`` (open it in any browser, no server needed)."""
    path = Path(path)
    path.write_text(viewer_page(trace, title or path.stem, view))
    return path


def embed(trace: Any, height: int = 420, view: str = "time-ordered") -> str:
    """The viewer in an ``<iframe srcdoc>``: an HTML snippet for a notebook output."""
    page = html.escape(viewer_page(trace, view=view), quote=True)
    return (f'<iframe class="teachgrad-speedscope" srcdoc="{page}" style="width: 100%; '
            f'height: {int(height)}px; border: 1px solid #ccc"></iframe>')


def table_html(prof: Any, sort_by: str = "self_cpu_time_total", row_limit: int = 10) -> str:
    """The top ``row_limit`` rows of ``prof.key_averages()`` as an HTML table."""
    from teachgrad.profiler.table import format_time

    rows = sorted(prof.key_averages(), key=lambda r: getattr(r, sort_by), reverse=True)[:row_limit]
    with_cuda = any(r.device_type != "cpu" for r in prof.key_averages())
    columns = [("Self CPU", "self_cpu_time_total"), ("CPU total", "cpu_time_total")]
    if with_cuda:
        columns += [("Self CUDA", "self_cuda_time_total"), ("CUDA total", "cuda_time_total")]
    head = "".join(f"<th>{c}</th>" for c in ["Name"] + [c for c, _ in columns] + ["# of Calls"])
    body = "".join(
        "<tr><td style='text-align:left'>" + html.escape(r.key) + "</td>"
        + "".join(f"<td>{format_time(getattr(r, a))}</td>" for _, a in columns)
        + f"<td>{r.count}</td></tr>" for r in rows)
    return (f"<table class='teachgrad-profile' style='font-family: monospace; text-align: right'>"
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


class ProfileView(widgets.VBox):
    """A finished profile: its busiest rows (sort and length chosen live) and its trace."""

    def __init__(self, prof: Any, row_limit: int = 10, sort_by: str = "self_cpu_time_total",
                 height: int = 420, view: str = "time-ordered") -> None:
        if not hasattr(prof, "key_averages") or not hasattr(prof, "chrome_trace"):
            raise TypeError(f"ProfileView takes a finished tg.profiler.profile, got {type(prof).__name__}")
        if sort_by not in SORT_KEYS:
            raise ValueError(f"sort_by must be one of {', '.join(SORT_KEYS)}, got {sort_by!r}")
        if type(row_limit) is not int or row_limit < 1:
            raise ValueError(f"row_limit must be an int >= 1, got {row_limit!r}")
        self.prof = prof
        self.sort_by = widgets.Dropdown(options=SORT_KEYS, value=sort_by, description="sort by")
        self.rows = widgets.IntSlider(value=row_limit, min=1, max=max(row_limit, len(prof.key_averages())),
                                      description="rows")
        self.table = widgets.HTML()
        self.viewer = widgets.HTML(embed(prof, height, view))
        super().__init__([widgets.HBox([self.sort_by, self.rows]), self.table, self.viewer])
        self.sort_by.observe(lambda change: self._draw(), names="value")
        self.rows.observe(lambda change: self._draw(), names="value")
        self._draw()

    def _draw(self) -> None:
        self.table.value = table_html(self.prof, self.sort_by.value, self.rows.value)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict:
        # for a notebook opened untrusted (no widget view): the table alone, sanitised HTML
        bundle = super()._repr_mimebundle_(**kwargs)
        bundle["text/html"] = (self.table.value + "<div style='font-size: 0.8em; color: #666'>"
                               "The table of the profile: run the cell for the trace viewer.</div>")
        return bundle
