"""The files of the job's attempt directory (local or remote), named once for every adapter,
the engine and the views. The directory is the attempt's own (`<invocation>/<attempt>` under a
root); its job's wrapper writes these files there and the engine reads or writes the few it
owns. The logs (and collected artifacts) keep these names in the local attempt directory."""

from __future__ import annotations

from typing import Final

from vibesys.osutil.layout import STDERR, STDOUT

#: Who holds the attempt: the job's claim (`kind=job`) or the engine's fence (`kind=fence`).
CLAIM_FILE: Final = "claim"
#: Why a wrapper that found the claim taken ran nothing.
REFUSED_FILE: Final = "refused"
#: The command's exit status, written atomically after it ended (128+N for signal N).
EXIT_CODE_FILE: Final = "exit_code"
#: Preparing the command's working directory failed: the command never ran.
SETUP_FAILED_FILE: Final = "setup_failed"
#: Left by the engine before it cancels the job, so the wrapper's end reads as a cancel.
CANCEL_FILE: Final = "cancel_requested"
#: The command's output streams: the same names as the local spool's (`vibesys.osutil.layout`, which
#: the read-only commands use without importing any adapter).
STDOUT_FILE: Final = STDOUT
STDERR_FILE: Final = STDERR
STREAMS: Final = (STDOUT_FILE, STDERR_FILE)
#: Where the command runs and leaves its artifacts (a copy of the candidate's snapshot).
WORK_DIR: Final = "work"
