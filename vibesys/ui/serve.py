"""`vibesys ui`: check the journal, listen on 127.0.0.1, print the one URL (with its random
token), serve until interrupted."""

from __future__ import annotations

import secrets
import socket
import sys
import webbrowser
from pathlib import Path

import uvicorn

from vibesys.errors import CommandFailed, boundary
from vibesys.journal_schema.opening import journal_path
from vibesys.ui.app import create_app
from vibesys.ui.reader import JournalReader

HOST = "127.0.0.1"
#: uvicorn's limit on a request's head arriving in pieces (past it: 400, and the connection is
#: closed); below it the application answers 414 or 431 with a page.
MAX_HEAD_BYTES = 64 * 1024


def listen(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Accepted connections inherit it: a response's head and body are two writes, and
        # Nagle would hold the body for the browser's delayed ACK (40 ms on a kept-alive one).
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((HOST, port))
        sock.listen(64)
    except OSError as exc:
        sock.close()
        raise CommandFailed(f"cannot listen on {HOST}:{port}: {exc.strerror or exc}") from None
    return sock


def serve(journal: Path | None, port: int, open_browser: bool) -> None:
    reader = JournalReader(journal_path(journal))
    with boundary(journal):
        reader.check()
    sock = listen(port)
    bound = sock.getsockname()[1]
    token = secrets.token_urlsafe(24)
    hosts = [f"{HOST}:{bound}", f"localhost:{bound}"]
    app = create_app(reader, token, hosts=hosts)
    config = uvicorn.Config(
        app,
        log_level="error",
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=1,
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        server_header=False,
    )
    url = f"http://{HOST}:{bound}/?token={token}"
    sys.stdout.write(f"{url}\n")
    sys.stdout.flush()
    if open_browser:
        webbrowser.open(url)
    server = uvicorn.Server(config)
    app.ui.stopping = lambda: server.should_exit
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
