"""One invocation seen from outside the engine, in the parts `vibesys.Client`'s handles
compose and the CLI and the bridge use directly: recording a submission under its
idempotency key (`keys.py`, `submission.py`), driving or following it (`driver.py`, the
engine's), and reading its status and logs (`reading.py`, the journal and the spool alone).

None of it loads pydantic (the JobResult is `vibesys.client`'s and `vibesys.job_result`'s),
and `reading.py` loads no engine: `vibesys run` and the read-only commands take only what
they use."""
