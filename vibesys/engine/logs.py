"""The log tail lives in `vibesys/logtail.py`, a leaf that `vibesys logs` uses without the
engine."""

from vibesys.logtail import CHUNK, LogTail

__all__ = ["CHUNK", "LogTail"]
