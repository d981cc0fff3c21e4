"""A report page's outline, read from its HTML: for the unit tests of the page and the integration tests of runs."""

from __future__ import annotations

import re
from html.parser import HTMLParser


class Outline(HTMLParser):
    """Which step sections hold which plots, the step table's rows, and anything that would load from outside."""

    def __init__(self) -> None:
        super().__init__()
        self.section: str | None = None
        self.plot: str | None = None
        self.plots: dict[str, list[str]] = {}
        self.table: str | None = None
        self.rows: dict[str, int] = {}
        self.external: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "section":
            self.section = found.get("id")
        elif tag == "div" and (found.get("class") or "").startswith("plot "):
            self.plot = (found.get("class") or "").split()[1]
        elif tag == "svg" and self.section and self.plot:
            self.plots.setdefault(self.section, []).append(self.plot)
            self.plot = None
        elif tag == "table":
            self.table = found.get("class")
        elif tag == "tr" and self.table:
            self.rows[self.table] = self.rows.get(self.table, 0) + 1
        if found.get("src") or (tag == "link" and found.get("href")):
            self.external.append(str(found))


def plot_svgs(page: str) -> list[str]:
    """Every plot's SVG in a page, in order."""
    return re.findall(r'<div class="plot[^"]*">(<svg.*?</svg>)', page, flags=re.DOTALL)


def drawn_series(svg: str) -> list[str]:
    """The path of every line matplotlib drew on the axes (grid lines, data lines and the legend's samples; tick
    marks and markers are <use> elements): two series drawn over each other have equal paths."""
    groups = re.findall(r'<g id="line2d_\d+">\s*<path d="([^"]*)"', svg)
    return [re.sub(r"\s+", " ", path).strip() for path in groups]


def coinciding_without_a_note(svg: str) -> list[str]:
    """Paths drawn more than once in one plot while its legend says nothing is identical to anything."""
    paths = drawn_series(svg)
    twice = sorted({path[:60] for path in paths if paths.count(path) > 1})
    return [] if "identical to" in svg else twice
