"""The engine: ties the pure states, the journal and the adapters together."""

from vibesys.engine.core import Engine, new_invocation_id
from vibesys.engine.drive import DriveOptions, StopFlag, drive, wait_for
from vibesys.engine.failpoints import FAILPOINTS, failpoint
from vibesys.engine.observation import RetryPolicy
from vibesys.engine.plan import Commit, Hold, PlanContext, Redo, plan
from vibesys.engine.reconcile import ReconcileRow, reconcile
from vibesys.osutil.logtail import LogTail

__all__ = [
    "FAILPOINTS",
    "Commit",
    "DriveOptions",
    "Engine",
    "Hold",
    "LogTail",
    "PlanContext",
    "ReconcileRow",
    "Redo",
    "RetryPolicy",
    "StopFlag",
    "drive",
    "failpoint",
    "new_invocation_id",
    "plan",
    "reconcile",
    "wait_for",
]
