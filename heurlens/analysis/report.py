"""A summary as an ordered list of headings, texts, tables and figures, composed once and rendered as a
self-contained HTML page, as markdown (results docs) or as plain text (the CLI); figures and circuitsvis
plots appear in HTML only.

plotly.js is embedded once (no CDN) and circuitsvis plots use their local source (the JavaScript
bundle inlined), so the page renders offline and from a file:// URL.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from heurlens.runtime.cache import atomic_write_bytes

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th { background: #f3f3f3; }
.note { color: #555; }
.banner { background: #fff3cd; border: 1px solid #e0c36a; padding: 0.6em 0.9em; }
"""


@dataclass
class Report:
    """Sections of text, tables and figures, in order; ``to_html`` renders the page."""

    title: str
    parts: list[tuple[str, Any]] = field(default_factory=list)  # (kind, text / table / figure / html)

    def heading(self, text: str) -> None:
        self.parts.append(("heading", text))

    def text(self, text: str) -> None:
        self.parts.append(("text", text))

    def banner(self, text: str) -> None:
        """A warning the reader must see before the numbers (runs that missed their target)."""
        self.parts.append(("banner", text))

    def table(self, table: pd.DataFrame) -> None:
        self.parts.append(("table", table))

    def figure(self, figure: go.Figure) -> None:
        self.parts.append(("figure", figure))

    def circuitsvis(self, rendered) -> None:
        """A circuitsvis ``RenderedHTML`` (its local, self-contained source is embedded)."""
        self.parts.append(("raw", rendered.local_src))

    def extend(self, section: Report) -> None:
        """Append another summary as a section under its title."""
        self.heading(section.title)
        self.parts.extend(section.parts)

    def to_text(self) -> str:
        """Plain text: headings underlined, tables as aligned columns; figures left out."""
        lines = [self.title, "=" * len(self.title)]
        for kind, content in self.parts:
            if kind == "heading":
                lines += ["", content, "-" * len(content)]
            elif kind == "text":
                lines.append(content)
            elif kind == "banner":
                lines += ["", f"!! {content}", ""]
            elif kind == "table":
                lines += [content.to_string(index=False), ""]
        return "\n".join(lines).rstrip() + "\n"

    def to_markdown(self, level: int = 1) -> str:
        """Markdown with the title at heading ``level`` (sections one below); figures left out."""
        lines = [f"{'#' * level} {self.title}", ""]
        for kind, content in self.parts:
            if kind == "heading":
                lines += [f"{'#' * (level + 1)} {content}", ""]
            elif kind == "text":
                lines += [content, ""]
            elif kind == "banner":
                lines += [f"> **Note.** {content}", ""]
            elif kind == "table":
                lines += [content.to_markdown(index=False), ""]
        return "\n".join(lines)

    def to_html(self) -> str:
        body = [f"<h1>{html.escape(self.title)}</h1>"]
        for kind, content in self.parts:
            if kind == "heading":
                body.append(f"<h2>{html.escape(content)}</h2>")
            elif kind == "text":
                body.append(f'<p class="note">{html.escape(content)}</p>')
            elif kind == "banner":
                body.append(f'<p class="banner">{html.escape(content)}</p>')
            elif kind == "table":
                body.append(content.to_html(index=False, border=0, float_format=lambda x: f"{x:.3g}"))
            elif kind == "figure":
                body.append(content.to_html(full_html=False, include_plotlyjs=False))
            else:
                body.append(content)
        return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{html.escape(self.title)}</title>"
                f"<style>{STYLE}</style><script type=\"text/javascript\">{get_plotlyjs()}</script></head>"
                f"<body>{''.join(body)}</body></html>\n")

    def write(self, path: Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, self.to_html().encode("utf-8"))
        return path
