"""The mutation check itself: the list is well-formed and current, and a run tells a killed
mutant from a survivor (tests/mutation/run.py; `scripts/mutants` runs the whole list)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import msgspec
import pytest

from tests.mutation.mutants import MUTANTS, TESTS_FOR, Mutant
from tests.mutation.run import (
    ROOT,
    Outcome,
    imports_the_copy,
    part,
    part_of,
    record_killers,
    recorded_killers,
    scratch_copy,
    stale,
    try_mutant,
    unmutated_failures,
    within,
)

BY_NAME = {m.name: m for m in MUTANTS}


def test_names_are_unique_and_reasons_are_one_line() -> None:
    assert len(BY_NAME) == len(MUTANTS)
    for mutant in MUTANTS:
        assert mutant.why and "\n" not in mutant.why, mutant.name
        assert "\n" not in mutant.equivalent, mutant.name
        assert mutant.original != mutant.replacement, mutant.name


def test_every_mutant_still_applies_to_the_code() -> None:
    # A change to a mutated line must update its mutant, or the check would test nothing.
    assert stale(MUTANTS) == []


def test_every_mutant_has_tests_that_exist() -> None:
    for mutant in MUTANTS:
        for target in mutant.test_args():
            assert (ROOT / target.split("::")[0]).exists(), (mutant.name, target)


def test_the_contract_modules_are_covered() -> None:
    assert {m.file for m in MUTANTS} >= set(TESTS_FOR)
    assert {"exit-infra-75-to-1", "exit-unresolved-4-to-0", "cas-ignores-version"} <= set(BY_NAME)


def test_the_docs_state_no_stale_count_of_mutants() -> None:
    # The list grows one line at a time: a count written out in prose goes stale unnoticed.
    for doc in (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))):
        text = doc.read_text(encoding="utf-8")
        for count in re.findall(r"(\d+)\s+(?:seeded\s+|named\s+)?mutants", text):
            assert int(count) == len(MUTANTS), f"{doc.name} says {count} mutants"


def test_a_scratch_copy_is_mutated_and_imports_itself(tmp_path: Path) -> None:
    mutant = BY_NAME["exit-infra-75-to-1"]
    copy = scratch_copy(tmp_path, mutant)
    mutated = (copy / mutant.file).read_text(encoding="utf-8")
    assert "EXIT_INFRA_FAILED = 1" in mutated and "EXIT_INFRA_FAILED = 75" not in mutated
    assert "EXIT_INFRA_FAILED = 75" in (ROOT / mutant.file).read_text(encoding="utf-8")
    assert imports_the_copy(copy)


def test_a_run_tells_killed_from_survived() -> None:
    mutant = BY_NAME["exit-infra-75-to-1"]
    killed = try_mutant(mutant, ("tests/test_render.py",))
    assert killed.killed and "tests/test_render.py::test_exit_status" in killed.detail
    # Tests that never look at exit statuses let the same mutant through.
    survived = try_mutant(
        mutant, ("tests/test_render.py::test_the_readme_states_the_same_contract",)
    )
    assert not survived.killed and survived.detail == "all tests passed"


@pytest.mark.parametrize(
    "first",
    [
        "tests/test_render.py::test_the_readme_states_the_same_contract",  # no longer kills it
        "tests/test_render.py::test_not_there",  # gone
    ],
)
def test_a_last_killer_that_does_not_kill_falls_back_to_the_whole_set(first: str) -> None:
    mutant = BY_NAME["exit-infra-75-to-1"]
    killed = try_mutant(mutant, ("tests/test_render.py",), first)
    assert killed.killed and "tests/test_render.py::test_exit_status" in killed.detail


def test_a_last_killer_alone_decides_when_it_kills() -> None:
    mutant = BY_NAME["exit-infra-75-to-1"]
    killer = "tests/test_render.py::test_exit_status"
    # The whole set would pass; the recorded killer alone kills it, and is named.
    done = try_mutant(
        mutant, ("tests/test_render.py::test_the_readme_states_the_same_contract",), killer
    )
    assert done.killed and done.killers[0].startswith(killer + "["), done.killers


def test_killers_are_recorded_for_known_mutants_only(tmp_path: Path) -> None:
    path = tmp_path / "killers.json"
    mutant = BY_NAME["exit-infra-75-to-1"]
    outcomes = [
        Outcome(mutant, True, 1.0, "by t", ("tests/test_render.py::test_exit_status",)),
        Outcome(BY_NAME["plan-redispatch"], False, 1.0, "all tests passed"),
    ]
    record_killers(
        {"gone-mutant": "tests/x.py::t", "plan-redispatch": "tests/y.py::t"}, outcomes, path
    )
    assert recorded_killers(path) == {
        "exit-infra-75-to-1": "tests/test_render.py::test_exit_status",
        "plan-redispatch": "tests/y.py::t",
    }
    assert recorded_killers(tmp_path / "none.json") == {}


def test_a_kill_counts_only_if_its_test_passes_unmutated() -> None:
    mutant = BY_NAME["exit-infra-75-to-1"]
    passing = "tests/test_render.py::test_exit_status"
    killed = Outcome(mutant, True, 1.0, f"by {passing}", (passing,))
    assert unmutated_failures([killed], {}) == []
    # A killer that cannot run unmutated (here: it does not exist) voids the kill.
    gone = Outcome(mutant, True, 1.0, "by it", ("tests/test_render.py::test_not_there",))
    [void] = unmutated_failures([gone], {})
    assert "fail unmutated" in void
    # Survivors need no check.
    assert unmutated_failures([Outcome(mutant, False, 1.0, "all tests passed")], {}) == []


def test_a_scratch_copy_keeps_byte_code_but_the_mutated_files(tmp_path: Path) -> None:
    mutant = BY_NAME["exit-infra-75-to-1"]
    target = ROOT / mutant.file
    compiled = sorted(target.parent.glob(f"__pycache__/{target.stem}.*.pyc"))
    if not compiled:
        pytest.skip("the checkout holds no byte code of the mutated module yet")
    copy = scratch_copy(tmp_path, mutant)
    assert not list((copy / mutant.file).parent.glob(f"__pycache__/{target.stem}.*.pyc"))
    assert list((copy / "vibesys" / "__pycache__").glob("errors.*.pyc"))


@pytest.mark.parametrize(
    ("test_id", "target", "inside"),
    [
        ("tests/a.py::test_x", "tests/a.py", True),
        ("tests/a.py::test_x[1-2]", "tests/a.py::test_x", True),
        ("tests/states/test_b.py::test_y", "tests/states", True),
        ("tests/a.py", "tests/a.py", True),
        ("tests/ab.py::test_x", "tests/a", False),
        ("tests/a.py::test_xy", "tests/a.py::test_x", False),
    ],
)
def test_which_tests_a_target_selects(test_id: str, target: str, inside: bool) -> None:
    assert within(test_id, target) is inside


def test_the_parts_of_the_check_take_every_mutant_once() -> None:
    first, last = part(MUTANTS, *part_of("1-4/5")), part(MUTANTS, *part_of("5/5"))
    assert sorted(m.name for m in first + last) == sorted(m.name for m in MUTANTS)
    assert last == MUTANTS[4::5] and not {m.name for m in first} & {m.name for m in last}
    assert part(MUTANTS, *part_of("1/1")) == MUTANTS


@pytest.mark.parametrize("text", ["0/5", "6/5", "3-2/5", "x", "1/0"])
def test_a_part_out_of_range_is_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        part_of(text)


@pytest.mark.parametrize(
    ("equivalent", "killed", "ok"),
    [("", True, True), ("", False, False), ("no change", False, True), ("no change", True, False)],
)
def test_what_counts_as_right(equivalent: str, killed: bool, ok: bool) -> None:
    mutant = msgspec.structs.replace(MUTANTS[0], equivalent=equivalent)
    assert Outcome(mutant, killed, 1.0, "").ok is ok


def test_a_mutant_whose_text_is_gone_is_reported(tmp_path: Path) -> None:
    (tmp_path / "vibesys" / "cli").mkdir(parents=True)
    (tmp_path / "vibesys" / "cli" / "render.py").write_text("EXIT = 75\nEXIT = 75\n")
    twice = Mutant("twice", "vibesys/cli/render.py", "EXIT = 75", "EXIT = 1", "why")
    gone = Mutant("gone", "vibesys/cli/render.py", "EXIT = 4", "EXIT = 0", "why")
    assert stale([twice, gone], tmp_path) == [
        "twice: its text occurs 2 times in vibesys/cli/render.py",
        "gone: its text occurs 0 times in vibesys/cli/render.py",
    ]


def test_the_reason_of_the_equivalent_cas_mutant_holds() -> None:
    # cas-ignores-state is equivalent only while every SQL write of an invocation's `state`
    # bumps `version`. (Cluster leases have states of their own and no version: each write
    # there requires the state it moves from, checked in the same transaction. A run slot's
    # state is its ticket's, written under the write lock by the slot's own process.)
    writes = [
        line
        for path in sorted((ROOT / "vibesys").rglob("*.py"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if re.search(r"\bSET\b.*\bstate\s*=", line)
        and "cluster_leases" not in line
        and "run_slots" not in line
    ]
    assert writes, "no SQL write of state found: update this check"
    assert all("version=version+1" in line for line in writes), writes
    assert BY_NAME["cas-ignores-state"].equivalent
