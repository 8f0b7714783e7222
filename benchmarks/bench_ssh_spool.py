"""Spooling a remote log over SSH: `SshTransport.stream(['cat', FILE], file)` against `ssh cat`.

The remote side is this host's sshd on 127.0.0.1:2222 (scripts/local-slurm; brought up first,
a no-op when it is up). A file of 1 GiB of random bytes (--quick: 50 MiB) is created in the
scratch directory, then copied into a local file by both sides in alternating order:

- ours: a fresh Python process builds an SshTransport and streams `cat FILE` into a file; it
  times itself from before the connection opens (interpreter start-up and imports excluded)
  and reports its peak RSS (VmHWM from /proc/self/status), which is what the memory target is
  about: the whole spooling process, imports included.
- ssh: `ssh -p 2222 -i KEY -o UserKnownHostsFile=... root@127.0.0.1 cat FILE > file`, OpenSSH's
  own client with its default cipher (chacha20-poly1305), timed around the whole process.

Targets (issue 4, Performance): our throughput >= 0.5x ssh's (ratio of the medians) and a peak
RSS under 100 MB. Informational: our throughput per cipher (the transport prefers
aes128-gcm@openssh.com), ssh with that same cipher, and the sha256 of our first copy.

    .venv/bin/python benchmarks/bench_ssh_spool.py [--quick] [--dir DIR]
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, Verdicts, median, parse_args, report

#: This benchmark talks to the sshd of the project's local Slurm cluster (tests mark it `slurm`).
NEEDS_CLUSTER = True
RATIO_TARGET = 0.5
RSS_TARGET_MB = 100.0
MIB = 1 << 20
CIPHERS = ("aes128-gcm@openssh.com", "aes128-ctr", "aes256-gcm@openssh.com")

#: Runs in a fresh interpreter: stream FILE into OUT, report time, bytes and memory as JSON.
_CHILD = """
import json, sys, time
from vibesys.adapters.transports.ssh import PREFERRED_CIPHERS, SshSettings, SshTransport

def hwm_kib():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])

key_dir, source, target, cipher = sys.argv[1:5]
ciphers = (cipher,) if cipher else PREFERRED_CIPHERS
before = hwm_kib()
start = time.perf_counter()
transport = SshTransport.from_settings(SshSettings(
    host="127.0.0.1", port=2222, user="root", ciphers=ciphers,
    identity_file=key_dir + "/id_ed25519", known_hosts=key_dir + "/known_hosts"))
with open(target, "wb") as sink:
    result = transport.stream(["cat", source], sink, timeout=3600)
seconds = time.perf_counter() - start
cipher_used = transport.connection.paramiko_transport.remote_cipher
transport.close()
print(json.dumps({"rc": result.returncode, "seconds": seconds, "cipher": cipher_used,
                  "hwm_before_kib": before, "hwm_kib": hwm_kib()}))
"""


def main() -> int:
    args = parse_args(__doc__.splitlines()[0])
    size_mib, rounds = (50, 2) if args.quick else (1024, 3)
    key_dir = _bring_up_sshd()
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="vibesys-bench-ssh-") as scratch:
        return run(Path(scratch), key_dir, size_mib, rounds)


def _bring_up_sshd() -> Path:
    script = ROOT / "scripts" / "local-slurm"
    up = subprocess.run([str(script), "up"], capture_output=True, text=True, check=False)
    if up.returncode != 0:
        raise SystemExit(f"scripts/local-slurm up failed:\n{up.stderr}")
    env_file = subprocess.run(
        [str(script), "env"], capture_output=True, text=True, check=True
    ).stdout.strip()
    return Path(env_file).parent / "ssh"


def _make_source(path: Path, size_mib: int) -> str:
    digest = hashlib.sha256()
    with path.open("wb") as out:
        for _ in range(size_mib):
            block = os.urandom(MIB)
            digest.update(block)
            out.write(block)
    return digest.hexdigest()


def _ours(key_dir: Path, source: Path, target: Path, cipher: str = "") -> dict[str, object]:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(key_dir), str(source), str(target), cipher],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"the spooling process failed:\n{done.stderr}")
    result: dict[str, object] = json.loads(done.stdout)
    if result["rc"] != 0 or target.stat().st_size != source.stat().st_size:
        raise SystemExit(f"our copy is incomplete: {result}")
    return result


def _ssh(key_dir: Path, source: Path, target: Path, cipher: str = "") -> float:
    argv = [
        "ssh",
        "-F",
        "/dev/null",
        "-p",
        "2222",
        "-i",
        str(key_dir / "id_ed25519"),
        "-o",
        f"UserKnownHostsFile={key_dir / 'known_hosts'}",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "IdentitiesOnly=yes",
        "-o",
        "BatchMode=yes",
        *(["-c", cipher] if cipher else []),
        "root@127.0.0.1",
        "cat " + shlex.quote(str(source)),
    ]
    with target.open("wb") as sink:
        start = time.perf_counter()
        subprocess.run(argv, stdout=sink, stderr=subprocess.PIPE, check=True)
        seconds = time.perf_counter() - start
    if target.stat().st_size != source.stat().st_size:
        raise SystemExit("ssh's copy is incomplete")
    return seconds


def run(scratch: Path, key_dir: Path, size_mib: int, rounds: int) -> int:
    source = scratch / "remote.log"
    target = scratch / "spool.log"
    expected = _make_source(source, size_mib)
    megabytes = size_mib * MIB / 1e6

    ours_seconds: list[float] = []
    ssh_seconds: list[float] = []
    peaks_kib: list[int] = []
    baseline_kib: list[int] = []
    identical = None
    for index in range(rounds):
        for side in ("ours", "ssh") if index % 2 == 0 else ("ssh", "ours"):
            if side == "ours":
                result = _ours(key_dir, source, target)
                ours_seconds.append(float(str(result["seconds"])))
                peaks_kib.append(int(str(result["hwm_kib"])))
                baseline_kib.append(int(str(result["hwm_before_kib"])))
                if identical is None:
                    with target.open("rb") as copy:
                        identical = hashlib.file_digest(copy, "sha256").hexdigest() == expected
            else:
                ssh_seconds.append(_ssh(key_dir, source, target))
            target.unlink()

    per_cipher: list[tuple[str, str]] = []
    for cipher in CIPHERS:
        result = _ours(key_dir, source, target, cipher)
        target.unlink()
        per_cipher.append(
            (f"  ours, {cipher}", f"{megabytes / float(str(result['seconds'])):8.1f} MB/s")
        )
    ssh_gcm = megabytes / _ssh(key_dir, source, target, "aes128-gcm@openssh.com")
    target.unlink()

    ours_rate = megabytes / median(ours_seconds)
    ssh_rate = megabytes / median(ssh_seconds)
    ratio = ours_rate / ssh_rate
    peak_mb = max(peaks_kib) * 1024 / 1e6
    print(f"{size_mib} MiB of random bytes over loopback SSH, {rounds} rounds, alternating order")
    report(
        [
            ("ours: SshTransport.stream median", f"{ours_rate:8.1f} MB/s  (connect included)"),
            ("ssh cat median", f"{ssh_rate:8.1f} MB/s  (connect and exec included)"),
            ("ours per round", "  ".join(f"{megabytes / s:.0f}" for s in ours_seconds)),
            ("ssh per round", "  ".join(f"{megabytes / s:.0f}" for s in ssh_seconds)),
            *per_cipher,
            ("  ssh, aes128-gcm@openssh.com", f"{ssh_gcm:8.1f} MB/s  (informational)"),
            ("peak RSS of the spooling process", f"{peak_mb:8.1f} MB"),
            (
                "  of which before connecting",
                f"{max(baseline_kib) * 1024 / 1e6:8.1f} MB  (interpreter and imports)",
            ),
            ("sha256 of our copy", "identical" if identical else "DIFFERENT"),
        ]
    )
    verdicts = Verdicts()
    verdicts.check("copy_is_byte_identical", bool(identical), "sha256 of our copy vs the source")
    verdicts.check(
        "peak_rss_bounded",
        peak_mb < RSS_TARGET_MB,
        f"peak RSS {peak_mb:.1f} MB < {RSS_TARGET_MB:.0f} MB",
    )
    verdicts.ratio("ours_vs_ssh_throughput", ratio, f"(target >= {RATIO_TARGET})")
    verdicts.target(
        "throughput_ratio", ratio >= RATIO_TARGET, f"throughput ratio {ratio:.2f} >= {RATIO_TARGET}"
    )
    return verdicts.finish()


if __name__ == "__main__":
    sys.exit(main())
