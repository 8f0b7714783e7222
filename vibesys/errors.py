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
        └── BackendUnavailable     could not reach the scheduler or did not hear its answer
            └── TransportLost      the connection to the remote side broke mid-operation

The engine reads these fields in one place (`vibesys.engine.execute`), never the message text.
"""

from __future__ import annotations


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


class BackendUnavailable(BackendError):
    """The scheduler could not be reached or did not answer."""


class TransportLost(BackendUnavailable):
    """The connection to the remote side dropped during an operation."""
