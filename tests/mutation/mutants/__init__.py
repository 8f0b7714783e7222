"""Named mutants of the contract modules: each is a plausible regression the suite must catch.

A mutant is one exact text replacement in one file (the text must occur exactly once) and a
line saying which regression it stands for. Adding one is one line in the MUTANTS of the
module of its area. `tests` chooses which tests run against it (default: TESTS_FOR[file], in
framework.py); `equivalent` gives the reason when a mutant cannot change behaviour (it must
then survive, or the list is wrong).

Run them with `scripts/mutants` (see tests/mutation/run.py).
"""

from __future__ import annotations

from tests.mutation.mutants import check_and_recorded, clusters_and_bridge, core, edges_and_queue
from tests.mutation.mutants.framework import TESTS_FOR, Mutant

#: Every named mutant, area by area.
MUTANTS: list[Mutant] = [
    *core.MUTANTS,
    *clusters_and_bridge.MUTANTS,
    *check_and_recorded.MUTANTS,
    *edges_and_queue.MUTANTS,
]

__all__ = ["MUTANTS", "TESTS_FOR", "Mutant"]
