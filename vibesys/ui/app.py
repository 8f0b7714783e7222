"""The web application: pages, the JSON API under /api/, server-sent events under /events/,
the stylesheet and the script. Every route only reads.

`Guard` stands in front of it all: only GET and HEAD, no body, a bounded URL, the expected
Host (a page of another site cannot reach this one by a DNS name), and the token (in the URL's
`token`, or `Authorization: Bearer`); a refused request gets a clear 4xx page (JSON under
/api/ and /events/), and an unexpected failure a 500 page, never a traceback.
"""

from __future__ import annotations

import codecs
import secrets
import sys
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from vibesys.errors import JournalError, UsageError
from vibesys.journal_schema.views import show_json
from vibesys.states import JobState
from vibesys.ui import diagram, events, logs, queries, views
from vibesys.ui.pages import Pages
from vibesys.ui.queries import BadQuery, ListFilter, NotFound, now_utc
from vibesys.ui.reader import JournalReader

MAX_PATH, MAX_QUERY, MAX_HEADERS = 1024, 4096, 16 * 1024
SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        b"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
]
_STATIC = {"app.css": "text/css; charset=utf-8", "app.js": "text/javascript; charset=utf-8"}
_ERRORS = {
    400: "Bad request",
    403: "Forbidden",
    404: "Not found",
    405: "Method not allowed",
    413: "Request too large",
    414: "URL too long",
    431: "Headers too large",
    500: "Internal error",
    503: "Journal unavailable",
}


def _machine(path: str) -> bool:
    return path.startswith(("/api/", "/events/"))


class Ui:
    """What the routes share: the journal, the templates, the clock."""

    def __init__(self, reader: JournalReader, token: str, clock: Callable[[], datetime]) -> None:
        self.reader = reader
        self.token = token
        self.pages = Pages(token, str(reader.path))
        self.clock = clock
        #: set by the server: whether it is shutting down (open event streams then end)
        self.stopping: Callable[[], bool] = lambda: False
        self.static = {
            name: resources.files("vibesys.ui").joinpath("static", name).read_bytes()
            for name in _STATIC
        }

    def error(self, path: str, status: int, message: str) -> Response:
        if _machine(path):
            return JSONResponse({"error": message, "status": status}, status)
        title = _ERRORS.get(status, "Error")
        html = self.pages.bare("refused.html", status=status, title=title, message=message)
        return HTMLResponse(html, status)

    def stamp(self) -> tuple[object, ...]:
        return self.reader.stamp()

    def list_parts(self, flt: ListFilter) -> dict[str, str]:
        page = self.reader.read(lambda j: views.page_of(j, flt))
        html = self.pages.render(
            "_list.html", page=page, flt=flt, states=list(JobState), now=self.clock()
        )
        return {"list-live": html}

    def list_fingerprint(self) -> tuple[object, ...]:
        return self.reader.read(queries.list_fingerprint)

    def invocation_parts(
        self, prefix: str, attempt: int, only: tuple[str, ...] | None = None
    ) -> tuple[events.Progress, dict[str, str]]:
        now = self.clock()
        view = self.reader.read(lambda j: views.invocation_view(j, prefix, attempt or None, now))
        inv = view.inv
        parts = {
            part: self.pages.render(f"_{part.replace('-', '_')}.html", v=view, now=now)
            for part in only or ("inv-top", "inv-bottom")
        }
        return events.Progress(inv.version, inv.state, inv.attempt, inv.invocation_dir), parts


def _params(request: Request, allowed: Iterable[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    names = {"token", *allowed}
    for name, value in request.query_params.multi_items():
        if name not in names:
            raise BadQuery(f"unknown parameter {name[:40]!r}")
        if name in found:
            raise BadQuery(f"{name} given twice")
        found[name] = value
    return found


def _number(params: dict[str, str], name: str, top: int = 1 << 62) -> int | None:
    value = params.get(name, "")
    if not value:
        return None
    if not value.isdecimal() or len(value) > 19 or int(value) > top:
        raise BadQuery(f"{name}={value[:40]!r}: a whole number from 0 to {top}")
    return int(value)


def _stream(value: str) -> str:
    if value not in logs.STREAMS:
        raise NotFound(f"no stream {value[:40]!r} (stdout or stderr)")
    return value


def build(ui: Ui) -> Starlette:
    def handled(fn: Callable[[Request], Response]) -> Callable[[Request], Response]:
        def route(request: Request) -> Response:
            path = request.url.path
            try:
                return fn(request)
            except BadQuery as exc:
                return ui.error(path, 400, str(exc))
            except NotFound as exc:
                return ui.error(path, 404, str(exc))
            except (UsageError, JournalError) as exc:  # the journal went, or is damaged
                _report(exc)  # its path and what is wrong, where the view runs: not to the peer
                return ui.error(path, 503, "the journal cannot be read; see the view's terminal")
            except Exception as exc:  # a bug: a 500 page, and one line where it runs
                _report(exc)
                return ui.error(path, 500, "the view failed; see its terminal")

        return route

    def page(name: str, **context: Any) -> HTMLResponse:
        context.setdefault("events", None)
        return HTMLResponse(ui.pages.render(name, token=ui.token, now=ui.clock(), **context))

    @handled
    def invocations(request: Request) -> Response:
        flt = ListFilter.parse(request.query_params.multi_items(), ui.clock())
        found = ui.reader.read(lambda j: views.page_of(j, flt))
        live = ui.pages.url("/events/list", flt.params())
        return page("list.html", page=found, flt=flt, states=list(JobState), events=live)

    def read_view(request: Request, *extra: str) -> tuple[dict[str, str], views.InvocationView]:
        """The invocation the path names, with the attempt `?attempt=` names (else the last)."""
        params = _params(request, ["attempt", *extra])
        prefix = queries.invocation_id(request.path_params["inv"])
        attempt, now = _number(params, "attempt"), ui.clock()
        return params, ui.reader.read(lambda j: views.invocation_view(j, prefix, attempt, now))

    def log_of(request: Request, view: views.InvocationView) -> tuple[str, Path]:
        stream = _stream(request.path_params["stream"])
        if not view.shown_attempt:
            raise NotFound(f"invocation {view.inv.id} has no attempt yet")
        return stream, logs.log_path(view.inv.invocation_dir, view.shown_attempt, stream)

    @handled
    def invocation(request: Request) -> Response:
        view = read_view(request)[1]
        live = None
        if view.live:
            ends = {c.stream: c.end for c in view.tails}
            live = ui.pages.url(
                f"/events/inv/{view.inv.id}",
                attempt=view.shown_attempt,
                out=ends.get("stdout", 0),
                err=ends.get("stderr", 0),
            )
        return page("invocation.html", v=view, events=live)

    @handled
    def log_file(request: Request) -> Response:
        _, path = log_of(request, read_view(request)[1])

        def text() -> Iterator[str]:
            decoder = codecs.getincrementaldecoder("utf-8")("replace")
            try:
                with open(path, "rb") as handle:
                    while block := handle.read(1 << 16):
                        yield decoder.decode(block)
            except FileNotFoundError:
                pass
            yield decoder.decode(b"", final=True)

        return StreamingResponse(text(), media_type="text/plain; charset=utf-8")

    @handled
    def clusters(request: Request) -> Response:
        _params(request, [])
        view = ui.reader.read(views.clusters_view)
        return page("clusters.html", v=view)

    @handled
    def api_list(request: Request) -> Response:
        flt = ListFilter.parse(request.query_params.multi_items(), ui.clock())
        return JSONResponse(ui.reader.read(lambda j: views.list_json(j, views.page_of(j, flt))))

    @handled
    def api_invocation(request: Request) -> Response:
        _params(request, [])
        prefix = queries.invocation_id(request.path_params["inv"])
        return JSONResponse(ui.reader.read(lambda j: show_json(j, queries.find(j, prefix))))

    @handled
    def api_details(request: Request) -> Response:
        return JSONResponse(views.extra_json(read_view(request)[1]))

    @handled
    def api_log(request: Request) -> Response:
        params, view = read_view(request, "offset")
        stream, path = log_of(request, view)
        offset = _number(params, "offset")
        chunk = logs.tail(path, stream) if offset is None else logs.read_from(path, stream, offset)
        return JSONResponse({"attempt": view.shown_attempt, **chunk.to_json()})

    @handled
    def api_states(request: Request) -> Response:
        _params(request, [])
        return JSONResponse(diagram.table_json())

    @handled
    def api_clusters(request: Request) -> Response:
        _params(request, [])
        return JSONResponse(views.clusters_json(ui.reader.read(views.clusters_view)))

    @handled
    def api_broker(request: Request) -> Response:
        _params(request, [])
        return JSONResponse(ui.reader.read(lambda j: views.broker_json(j, views.clusters_view(j))))

    @handled
    def api_queue(request: Request) -> Response:
        _params(request, [])
        return JSONResponse(views.queue_json(ui.reader.read(views.clusters_view)))

    @handled
    def list_stream(request: Request) -> Response:
        flt = ListFilter.parse(request.query_params.multi_items(), ui.clock())
        return _sse(events.list_events(ui, flt))

    @handled
    def invocation_stream(request: Request) -> Response:
        params = _params(request, ["attempt", "out", "err"])
        prefix = queries.invocation_id(request.path_params["inv"])
        page_at = [_number(params, name) or 0 for name in ("attempt", "out", "err")]
        attempt, out, err = events.resume_point(
            request.headers.get("last-event-id"), page_at[0], page_at[1], page_at[2]
        )
        ui.reader.read(lambda j: queries.find(j, prefix))  # 404 now, not in the stream
        offsets = {"stdout": out, "stderr": err}
        return _sse(events.invocation_events(ui, prefix, attempt, offsets))

    @handled
    def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in _STATIC:
            raise NotFound(f"no file {name[:40]!r}")
        return Response(ui.static[name], media_type=_STATIC[name])

    @handled
    def missing(request: Request) -> Response:
        raise NotFound(f"no page {request.url.path[:80]!r}")

    routes = [
        Route("/", invocations),
        Route("/inv/{inv}", invocation),
        Route("/inv/{inv}/logs/{stream}", log_file),
        Route("/clusters", clusters),
        Route("/api/invocations", api_list),
        Route("/api/invocations/{inv}", api_invocation),
        Route("/api/invocations/{inv}/details", api_details),
        Route("/api/invocations/{inv}/logs/{stream}", api_log),
        Route("/api/states", api_states),
        Route("/api/clusters", api_clusters),
        Route("/api/broker", api_broker),
        Route("/api/queue", api_queue),
        Route("/events/list", list_stream),
        Route("/events/inv/{inv}", invocation_stream),
        Route("/static/{name}", static),
        Route("/{rest:path}", missing),
    ]
    return Starlette(routes=routes)


def _report(exc: Exception) -> None:
    print(f"vibesys ui: error: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)


def _sse(stream: Any) -> StreamingResponse:
    return StreamingResponse(
        stream, media_type="text/event-stream", headers={"x-accel-buffering": "no"}
    )


class Guard:
    """The checks every request passes before any route sees it (see the module's doc)."""

    def __init__(self, ui: Ui, app: ASGIApp, hosts: Iterable[str] | None) -> None:
        self.ui = ui
        self.app = app
        self.hosts = None if hosts is None else {h.encode() for h in hosts}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                await self.app(scope, receive, send)
            return
        started = False

        async def secured(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        refusal = self.refusal(scope)
        if refusal is not None:
            response = self.ui.error(scope.get("path", "/"), *refusal)
            await response(scope, receive, secured)
            return
        try:
            await self.app(scope, receive, secured)
        except Exception as exc:  # a stream that failed half-way, or a bug outside the routes
            _report(exc)
            if not started:
                response = self.ui.error(scope["path"], 500, "the view failed; see its terminal")
                await response(scope, receive, secured)

    def refusal(self, scope: Scope) -> tuple[int, str] | None:
        path, query = scope.get("path", ""), scope.get("query_string", b"")
        if scope["method"] not in ("GET", "HEAD"):
            return 405, f"{scope['method'][:20]} is not allowed: this view only reads"
        if len(path) > MAX_PATH or len(scope.get("raw_path") or b"") > MAX_PATH * 3:
            return 414, f"the path is longer than {MAX_PATH} characters"
        if len(query) > MAX_QUERY:
            return 414, f"the query is longer than {MAX_QUERY} bytes"
        if sum(len(k) + len(v) for k, v in scope["headers"]) > MAX_HEADERS:
            return 431, f"the request's headers are larger than {MAX_HEADERS} bytes"
        headers = dict(scope["headers"])
        if headers.get(b"content-length", b"0") != b"0" or b"transfer-encoding" in headers:
            return 413, "a request to this view carries no body"
        if self.hosts is not None and headers.get(b"host") not in self.hosts:
            return 400, "unexpected Host header: open the URL vibesys ui printed"
        if not self.authorized(query, headers.get(b"authorization", b"")):
            return 403, "this page needs the token in the URL that vibesys ui printed"
        return None

    def authorized(self, query: bytes, authorization: bytes) -> bool:
        given = [v for k, v in parse_qsl(query.decode("latin-1"), True) if k == "token"]
        if authorization.startswith(b"Bearer "):
            given.append(authorization[7:].decode("latin-1"))
        expected = self.ui.token.encode()
        return any(secrets.compare_digest(g.encode("latin-1", "replace"), expected) for g in given)


def create_app(
    reader: JournalReader,
    token: str,
    *,
    hosts: Iterable[str] | None = None,
    clock: Callable[[], datetime] = now_utc,
) -> Guard:
    ui = Ui(reader, token, clock)
    return Guard(ui, build(ui), hosts)
