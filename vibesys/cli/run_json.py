"""`vibesys run --json`: `run`, whose JSON object carries the invocation's JobResult. The
JobResult is a pydantic model: this is the one `run` that loads pydantic."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vibesys.cli import run_command
from vibesys.job_result import with_result
from vibesys.journal_schema import Invocation, Journal
from vibesys.journal_schema.views import show_json

__all__ = ["execute_run", "json_record"]


def json_record(journal: Journal, inv: Invocation) -> dict[str, Any]:
    """`run --json`'s and `wait --json`'s object: the invocation's record with its JobResult
    under "result" (null while it has not ended)."""
    return with_result(journal, inv, show_json(journal, inv))


def execute_run(values: Mapping[str, Any]) -> int:
    return run_command.execute_run(values, json_record)
