"""Re-staging an unchanged candidate: bytes transferred and seconds of hashing per 100 MB.

A synthetic candidate of 10,000 files (~100 MB, 1-19 KiB each, in 100 directories, plus a
`.git/`, a `__pycache__/` and logs that the default policy leaves out) is staged once through
the real `LocalTransport` into a scratch "remote" directory, then staged again unchanged: the
manifest is rebuilt (walk + sha256 of every file) and the remote side verifies its copy.

Figures:
- manifest build: wall time of `build_manifest`, and per 100 MB of content (target < 1 s);
- baseline: a bare loop of open/read/sha256 over the same files (no walk, no policy), timed
  alternately with the build; the `ratio` line is build / baseline;
- first stage: bytes sent and remote commands;
- re-stage: bytes sent (target 0), wall time of the remote verification, and the whole
  re-stage (manifest build + verification) per 100 MB.
The page cache is warm for both sides (the files were just written): this measures hashing and
system calls, not the disk. On a real cluster the verification runs on the login node.

Targets (issue 4): re-stage transfers 0 bytes; manifest build < 1 s per 100 MB.

    .venv/bin/python benchmarks/bench_snapshot.py [--quick] [--dir DIR]
"""

from __future__ import annotations

import hashlib
import random
import tempfile
import time
from pathlib import Path, PurePosixPath

from _common import Verdicts, interleave, median, parse_args, report

TARGET_SECONDS_PER_100MB = 1.0
HUNDRED_MB = 100 * 1000 * 1000


def main() -> int:
    args = parse_args(__doc__.splitlines()[0])
    files, rounds = (400, 3) if args.quick else (10_000, 5)
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="vibesys-bench-snapshot-") as scratch:
        return run(Path(scratch), files, rounds)


def make_candidate(root: Path, files: int, seed: int = 11) -> int:
    """`files` files of 1-19 KiB in 100 directories, and some that the policy leaves out.
    Returns the bytes of included content written."""
    rng = random.Random(seed)
    block = rng.randbytes(1 << 20)
    total = 0
    for index in range(files):
        directory = root / f"pkg{index % 100:02d}"
        directory.mkdir(exist_ok=True)
        size = rng.randint(1024, 19 * 1024)
        offset = rng.randint(0, len(block) - size)
        path = directory / f"module_{index:05d}.py"
        path.write_bytes(index.to_bytes(4, "big") + block[offset : offset + size - 4])
        if index % 50 == 0:
            path.chmod(0o755)
        total += size
    for name in (".git/objects/pack/big.pack", "__pycache__/x.pyc", "logs/run.log"):
        excluded = root / name
        excluded.parent.mkdir(parents=True, exist_ok=True)
        excluded.write_bytes(block[:65536])
    return total


def bare_hash(paths: list[Path]) -> None:
    buffer = bytearray(1 << 20)
    view = memoryview(buffer)
    for path in paths:
        digest = hashlib.sha256()
        with open(path, "rb", buffering=0) as handle:
            while count := handle.readinto(view):
                digest.update(view[:count])
        digest.hexdigest()


def run(scratch: Path, files: int, rounds: int) -> int:
    from vibesys.adapters.staging import stage
    from vibesys.adapters.transports import LocalTransport
    from vibesys.snapshot import EntryKind, build_manifest

    candidate = scratch / "candidate"
    candidate.mkdir()
    content = make_candidate(candidate, files)
    remote_root = PurePosixPath(scratch / "remote")
    runner = LocalTransport()

    manifest = build_manifest(candidate)
    paths = [candidate / e.path for e in manifest.entries if e.kind is EntryKind.FILE]

    def build() -> float:
        start = time.perf_counter()
        build_manifest(candidate)
        return time.perf_counter() - start

    def baseline() -> float:
        start = time.perf_counter()
        bare_hash(paths)
        return time.perf_counter() - start

    build_samples, bare_samples = interleave(rounds, build, baseline)
    build_s, bare_s = median(build_samples), median(bare_samples)
    per_100mb = build_s * HUNDRED_MB / content

    start = time.perf_counter()
    first = stage(manifest, candidate, runner, remote_root)
    first_s = time.perf_counter() - start

    restage_samples: list[float] = []
    verify_samples: list[float] = []
    uploaded: list[int] = []
    not_reused = 0
    for _ in range(rounds):
        start = time.perf_counter()
        again = build_manifest(candidate)
        built = time.perf_counter()
        result = stage(again, candidate, runner, remote_root)
        done = time.perf_counter()
        restage_samples.append(done - start)
        verify_samples.append(done - built)
        uploaded.append(result.uploaded_bytes)
        not_reused += not (result.reused and again.digest == manifest.digest)
    restage_s = median(restage_samples)
    restage_per_100mb = restage_s * HUNDRED_MB / content

    print(
        f"candidate: {manifest.count(EntryKind.FILE)} files, {content / 1e6:.1f} MB of content, "
        f"{len(manifest.excluded)} excluded entries; {rounds} rounds, page cache warm"
    )
    report(
        [
            ("manifest build (walk + sha256) median", f"{build_s:8.3f} s"),
            (
                "  per 100 MB of content",
                f"{per_100mb:8.3f} s  (target < {TARGET_SECONDS_PER_100MB})",
            ),
            ("bare open/read/sha256 loop median", f"{bare_s:8.3f} s"),
            ("first stage: bytes sent", f"{first.uploaded_bytes:>8}"),
            ("first stage: remote commands", f"{first.commands:>8}"),
            ("first stage: wall time", f"{first_s:8.3f} s"),
            ("re-stage: bytes sent (max of rounds)", f"{max(uploaded):>8}  (target 0)"),
            ("re-stage: remote verification median", f"{median(verify_samples):8.3f} s"),
            ("re-stage: build + verification median", f"{restage_s:8.3f} s"),
            ("  per 100 MB of content", f"{restage_per_100mb:8.3f} s  (informational)"),
        ]
    )
    verdicts = Verdicts()
    verdicts.check(
        "manifest_counts_the_content",
        manifest.total_bytes == content,
        f"manifest {manifest.total_bytes} bytes, candidate {content} bytes",
    )
    verdicts.check(
        "restage_reuses_the_snapshot",
        not_reused == 0,
        f"{rounds - not_reused} of {rounds} re-stages reused the same digest",
    )
    verdicts.check(
        "restage_sends_no_bytes", max(uploaded) == 0, f"re-stage sent {max(uploaded)} bytes"
    )
    verdicts.ratio("manifest_build_vs_bare_hash", build_s / bare_s, "(informational)")
    verdicts.target(
        "manifest_build_per_100mb",
        per_100mb < TARGET_SECONDS_PER_100MB,
        f"{per_100mb:.3f} s per 100 MB (target < {TARGET_SECONDS_PER_100MB})",
    )
    return verdicts.finish()


if __name__ == "__main__":
    raise SystemExit(main())
