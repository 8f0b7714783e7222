"""Where the checkout is, for tests that read its files or run its programs."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
