"""The typed error tree.

Foreign exceptions (subprocess, sqlite3, paramiko, sky) are translated into these at the edge
that meets them. Decisions (retry, reject, mark unresolved) read the type and its attributes,
never the message text.

    VibesysError
    ├── UsageError                 bad input from a person: a CLI argument, an unknown invocation
    ├── ConfigError                a configuration file or value is invalid (names the key)
    ├── JournalError               the journal cannot be used
    │   ├── NotAJournal            the file is not a vibesys journal (or not SQLite at all)
    │   ├── JournalCorrupt         a vibesys journal whose pages are damaged
    │   ├── JournalTooNew          written by a newer vibesys; refused, never downgraded
    │   ├── JournalOnNetworkFS     WAL needs one host's shared memory; refused on NFS/Lustre/...
    │   ├── JournalFault           a write to an open journal failed (disk full, I/O error,
    │   │                          made immutable), or the file is no longer at its path
    │   └── StaleState             compare-and-swap lost: someone else moved the invocation
    ├── InvalidTransition          the transition table does not allow this event here
    └── BackendError               an adapter's side effect failed; two fields say what it proves:
        │                          `maybe_submitted` (may it have taken effect remotely?) and
        │                          `retryable` (can trying again help, or must a person act?)
        ├── SubmitRejected         the scheduler refused the request; nothing was submitted
        ├── BackendMisconfigured   a configuration or security failure (changed host key,
        │                          refused key, missing candidate, exec rejected); `fix` says
        │                          what a person must do; never retried
        │   └── CredentialRefused  the site refused our login (an expired SSH certificate, a
        │                          key no longer accepted): never an outage; `credential`
        │                          names it, `fix` the renewal
        └── BackendUnavailable     could not reach the scheduler or did not hear its answer
            └── TransportLost      the connection to the remote side broke mid-operation

The engine reads these fields in one place (`vibesys.engine.execute`), never the message text.

Every command's entry (the typer app, the entry point's own commands, `run`, the broker's and
the bridge's commands, the web view) meets them at one boundary, `boundary()`: an error of
ours, or SQLite's, becomes `CommandFailed`, one line and an exit status, never a traceback.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

#: --journal as given (None: the default, or $VIBESYS_JOURNAL)
JournalArg = str | os.PathLike[str] | None

#: The journal's path when neither --journal nor VIBESYS_JOURNAL names one. Here, at the
#: bottom, because the boundary names the journal in SQLite's line.
DEFAULT_JOURNAL: Final = Path(".vibesys") / "journal.db"

#: The statuses the boundary ends a command with (`states.exits` lists them with the rest).
EXIT_BAD_INPUT: Final = 2
EXIT_JOURNAL_FAULT: Final = 73  # EX_CANTCREAT: the journal could not be written mid-run (disk
# full, I/O error, made immutable, deleted or replaced); the job may still be running


def journal_path(explicit: JournalArg = None) -> Path:
    """--journal, else $VIBESYS_JOURNAL, else .vibesys/journal.db in the current directory."""
    if explicit:
        return Path(explicit)
    from_env = os.environ.get("VIBESYS_JOURNAL")
    return Path(from_env) if from_env else DEFAULT_JOURNAL


class VibesysError(Exception):
    """Base of every error vibesys raises on purpose."""


class UsageError(VibesysError):
    """Bad input from a person (argument, option, unknown invocation)."""


class ConfigError(VibesysError):
    """A configuration value is invalid; the message names the key."""


class JournalError(VibesysError):
    """The journal cannot be opened or used."""


class NotAJournal(JournalError):
    """The file exists but is not a vibesys journal."""


class JournalCorrupt(JournalError):
    """The file is a vibesys journal, but SQLite reports damaged pages."""


class JournalTooNew(JournalError):
    """The journal was written by a newer schema than this vibesys knows."""


class JournalOnNetworkFS(JournalError):
    """SQLite WAL needs the journal on a local file system."""


class JournalFault(JournalError):
    """A write to a journal in use failed (its disk is full, an I/O error, the file made
    immutable), or the file this process opened is no longer at its path (deleted or replaced).
    What the failed commit authorized was not done; what earlier commits authorized may still
    be running."""

    def __init__(self, message: str, *, replaced: bool = False) -> None:
        super().__init__(message)
        #: the file is no longer at its path (rather than a write that failed)
        self.replaced = replaced


class StaleState(JournalError):
    """A compare-and-swap on an invocation's state lost to another writer."""


class InvalidTransition(VibesysError):
    """An event was applied to a state that does not accept it."""

    def __init__(self, state: str, event: str) -> None:
        super().__init__(f"event {event} is not allowed in state {state}")
        self.state = state
        self.event = event


class BackendError(VibesysError):
    """An adapter's side effect failed.

    `maybe_submitted`: the failed operation may still have taken effect remotely (a submit that
    timed out may have queued the job). `retryable`: trying again can help; when False, a person
    must act first and `fix` says what to do.
    """

    retryable: bool = True
    maybe_submitted: bool = False

    def __init__(
        self,
        message: str,
        *,
        evidence: str = "",
        maybe_submitted: bool | None = None,
        retryable: bool | None = None,
        fix: str = "",
    ) -> None:
        super().__init__(message)
        self.evidence = evidence or message
        self.fix = fix
        if maybe_submitted is not None:
            self.maybe_submitted = maybe_submitted
        if retryable is not None:
            self.retryable = retryable


class SubmitRejected(BackendError):
    """The scheduler refused the request; it is proven that nothing was submitted."""

    retryable = False


class BackendMisconfigured(BackendError):
    """A configuration or security failure: nothing was submitted, and retrying cannot help
    until a person applies `fix` (a changed host key, a refused key, an unreadable known_hosts,
    a missing candidate directory, a command the system refuses to execute)."""

    retryable = False


class CredentialRefused(BackendMisconfigured):
    """The site refused our login: an SSH certificate that expired, a key it no longer accepts.
    Waiting does not cure it, so it is never retried as a lost transport; a person renews the
    credential (`fix`). Before anything may have been submitted it ends the invocation
    MISCONFIGURED; once a job may exist, its invocation is left as it is (as in an outage) and
    reports name `credential` and the renewal, until the renewal lets `reconcile` carry it on.
    """

    def __init__(
        self, message: str, *, credential: str, fix: str, evidence: str = "", maybe_submitted: bool
    ) -> None:
        super().__init__(message, evidence=evidence, maybe_submitted=maybe_submitted, fix=fix)
        #: what was refused: "the SSH certificate PATH (expired at T)", "the key PATH"
        self.credential = credential


class BackendUnavailable(BackendError):
    """The scheduler could not be reached or did not answer."""


class TransportLost(BackendUnavailable):
    """The connection to the remote side dropped during an operation."""


def journal_error(exc: sqlite3.Error, path: Path, *, writing: bool = False) -> JournalError:
    """SQLite's failure on the journal at `path` as one of our errors, by its error code."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code == sqlite3.SQLITE_CORRUPT:
        return JournalCorrupt(
            f"{path} is a damaged journal ({exc}); restore it from a backup, or move it aside "
            "and run `vibesys reconcile` on a fresh one"
        )
    if code == sqlite3.SQLITE_NOTADB:
        return NotAJournal(f"{path} is not a vibesys journal ({exc})")
    if code in (sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM):
        how = "for writing" if writing else "for reading"
        return JournalError(f"cannot open the journal {path} {how} ({exc})")
    if code == sqlite3.SQLITE_FULL:
        return JournalError(f"the disk holding the journal {path} is full ({exc})")
    return JournalError(f"the journal {path} cannot be used ({exc})")


#: What begins the one line a failed command prints (a parent, `vibesys.Session`, reads it).
ERROR_LINE: Final = "vibesys: error: "


class CommandFailed(Exception):
    """A command ends with `status` after printing `line` (one `vibesys: error:` line). Not a
    VibesysError: it is what one becomes at the boundary, and is never translated again."""

    def __init__(self, message: str, status: int = EXIT_BAD_INPUT) -> None:
        super().__init__(message)
        self.status = status

    @property
    def line(self) -> str:
        return f"{ERROR_LINE}{self}"


def failure(exc: BaseException, journal: JournalArg = None) -> CommandFailed | None:
    """The line and status `exc` ends a command with; None when it is not ours (nor SQLite's,
    which a journal damaged half-way through a read raises). A journal that failed under a
    write is status 73 and says the way out; any other error of ours is status 2."""
    if isinstance(exc, CommandFailed):
        return exc
    if isinstance(exc, JournalFault):
        way = "put the journal back" if exc.replaced else "fix the disk"
        return CommandFailed(f"{exc}; {way}, then run `vibesys reconcile`", EXIT_JOURNAL_FAULT)
    if isinstance(exc, VibesysError):
        return CommandFailed(str(exc))
    if isinstance(exc, sqlite3.Error):
        return CommandFailed(str(journal_error(exc, journal_path(journal))))
    return None


@contextmanager
def boundary(journal: JournalArg = None) -> Iterator[None]:
    """Within: an error of ours or SQLite's leaves as CommandFailed (`failure`); `journal` is
    the --journal given, named in SQLite's line. Anything else passes unchanged."""
    try:
        yield
    except Exception as exc:
        failed = failure(exc, journal)
        if failed is None or failed is exc:
            raise
        raise failed from None
