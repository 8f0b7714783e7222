"""The log tail lives in `vibesys/osutil/logtail.py`, a leaf that `vibesys logs` uses without the
engine."""

from vibesys.osutil.logtail import CHUNK, LogTail

__all__ = ["CHUNK", "LogTail"]
