"""A test-only batch scheduler: `qsys.py` (submit, query and cancel commands over a state
directory, jobs backed by local processes) and its adapter on the batch base (`adapter.py`)."""
