"""The templates (package data, autoescaped) and what they need: links that carry the token,
times and durations for people."""

from __future__ import annotations

import shlex
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from vibesys.journal_schema.clock import iso
from vibesys.ui.driver import lease_note
from vibesys.ui.logs import TAIL_BYTES
from vibesys.ui.timeline import until_now


def since(moment: datetime | None, now: datetime) -> timedelta | None:
    return None if moment is None else now - moment


def stamp(moment: datetime | None) -> str:
    """A recorded time as the journal writes it."""
    return "" if moment is None else iso(moment)


def span(delta: timedelta | float | None) -> str:
    """A duration in at most two units: 850ms, 42s, 3m 12s, 2h 05m, 4d 3h."""
    if delta is None:
        return "-"
    seconds = delta.total_seconds() if isinstance(delta, timedelta) else float(delta)
    if seconds < 1:
        return f"{max(seconds, 0) * 1000:.0f}ms"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    return f"{s // 86400}d {s % 86400 // 3600}h"


def tick(delta: timedelta | None, going: bool = True) -> Markup:
    """A duration as `span` writes it; one still `going` carries its milliseconds at render
    time, from which the script keeps counting (the page's times move without a re-read)."""
    text = span(delta)
    if delta is None or not going:
        return Markup(text)
    millis = int(delta.total_seconds() * 1000)
    # Both are digits and unit letters: nothing to escape (Markup.format costs a 500-row page).
    return Markup(f'<span class="tick" data-ms="{millis}">{text}</span>')


class Pages:
    """The templates of one server: every link they make carries its token."""

    def __init__(self, token: str, journal_label: str) -> None:
        self.token = token
        self._token_query = urlencode({"token": token})
        self.env = Environment(
            loader=PackageLoader("vibesys.ui", "templates"),
            autoescape=select_autoescape(["html"]),
            undefined=StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.globals.update(
            url=self.url,
            span=span,
            tick=tick,
            lease_note=lease_note,
            tail_bytes=TAIL_BYTES,
            journal=journal_label,
            shell=shlex.join,
            since=since,
            stamp=stamp,
            until_now=until_now,
        )

    def url(self, path: str, params: dict[str, Any] | None = None, **more: Any) -> str:
        """`path` with the token and the parameters (empty ones left out)."""
        if not params and not more:  # every row's link: urlencode costs a 500-row page
            return f"{path}?{self._token_query}"
        query = {"token": self.token}
        for name, value in {**(params or {}), **more}.items():
            if value not in (None, ""):
                query[name] = str(value)
        return f"{path}?{urlencode(query)}"

    def render(self, name: str, **context: Any) -> str:
        return self.env.get_template(name).render(**context)

    def bare(self, name: str, **context: Any) -> str:
        """A template rendered without the server's globals: a refusal carries no token and no
        journal path, whoever asked."""
        template = self.env.get_template(name)
        return template.render(**{key: None for key in ("url", "journal")}, **context)
