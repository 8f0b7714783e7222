"""Live acceptance of the profiling route on a real GPU site (opt-in; docs/gpu-broker.md,
"Checking a profiler on a GPU site").

Runs only when VIBESYS_GPU_ACCEPTANCE_SITE names the site file (slurm.toml with a
[vibesys.agent_gpu] table that offers an `nsys` profiler). Through a real `vibesys broker
serve` on that site: `vibesys-gpu --gpus 1 --profile nsys -- python3 matmul.py`, a small CUDA
matmul with torch or cupy (whichever the node's python imports; skipped, with the reason, when
neither reaches a GPU); the `.nsys-rep` capture comes home verified (the size and sha256 the
client printed are the file's) and, when nsys is on PATH here, `nsys stats` reads it and finds
the matmul's kernel. Optional: VIBESYS_GPU_ACCEPTANCE_ROOT (a directory the nodes see at the
same path, for the workspace; default the test's temporary directory),
VIBESYS_GPU_ACCEPTANCE_PYTHON (the node's python with torch or cupy, inside read_only_paths;
default `python3`), VIBESYS_GPU_ACCEPTANCE_WAIT (seconds a job may take, queueing included;
default 1800).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.slurm.test_broker_slurm import Broker, start_broker, stop_broker

SITE = os.environ.get("VIBESYS_GPU_ACCEPTANCE_SITE")
ROOT = os.environ.get("VIBESYS_GPU_ACCEPTANCE_ROOT")
PYTHON = os.environ.get("VIBESYS_GPU_ACCEPTANCE_PYTHON", "python3")
WAIT = float(os.environ.get("VIBESYS_GPU_ACCEPTANCE_WAIT", "1800"))

pytestmark = [
    pytest.mark.skipif(not SITE, reason="opt-in: set VIBESYS_GPU_ACCEPTANCE_SITE"),
    pytest.mark.timeout(3 * WAIT),
]

#: Which library reaches a GPU on the node: its name, or `none: why`.
PROBE = """
try:
    import torch
    if torch.cuda.is_available():
        print("torch")
        raise SystemExit(0)
    torch_says = "torch sees no CUDA device"
except ImportError:
    torch_says = "no torch"
try:
    import cupy
    if cupy.cuda.runtime.getDeviceCount() > 0:
        print("cupy")
        raise SystemExit(0)
    cupy_says = "cupy sees no CUDA device"
except ImportError:
    cupy_says = "no cupy"
except Exception as exc:
    cupy_says = f"cupy: {exc}"
print(f"none: {torch_says}; {cupy_says}")
"""

#: Ten 2048x2048 float32 matmuls with the library named in argv[1].
MATMUL = """
import sys
n = 2048
if sys.argv[1] == "torch":
    import torch
    a = torch.randn(n, n, device="cuda")
    b = torch.randn(n, n, device="cuda")
    for _ in range(10):
        c = a @ b
    torch.cuda.synchronize()
    shape = tuple(c.shape)
else:
    import cupy
    a = cupy.random.random((n, n), dtype=cupy.float32)
    b = cupy.random.random((n, n), dtype=cupy.float32)
    for _ in range(10):
        c = a @ b
    cupy.cuda.Device().synchronize()
    shape = c.shape
print(f"matmul ok {sys.argv[1]} {shape}")
"""

CAPTURED = re.compile(r"capture (\S+\.nsys-rep): (\d+) bytes, sha256 ([0-9a-f]{64})")


def run(broker: Broker, *argv: str) -> tuple[int, str, str]:
    proc = broker.client(*argv)
    out, err = proc.communicate(timeout=WAIT)
    return proc.returncode, out, err


def test_nsys_profile_of_a_cuda_matmul_comes_home_verified(tmp_path: Path) -> None:
    assert SITE is not None
    root = Path(ROOT) / f"vibesys-gpu-acceptance-{uuid.uuid4().hex[:8]}" if ROOT else tmp_path
    broker = start_broker(root, "acceptance", config=Path(SITE))
    try:
        (broker.workspace / "probe.py").write_text(PROBE)
        (broker.workspace / "matmul.py").write_text(MATMUL)
        code, out, err = run(broker, "--gpus", "1", "--", PYTHON, "probe.py")
        assert code == 0, err
        library = out.strip().splitlines()[-1] if out.strip() else "none: no output"
        if library.startswith("none"):
            pytest.skip(f"neither torch nor cupy reaches a GPU on the node ({library})")
        argv = ["--gpus", "1", "--profile", "nsys", "--", PYTHON, "matmul.py", library]
        code, out, err = run(broker, *argv)
        assert code == 0 and f"matmul ok {library}" in out, err
        found = CAPTURED.search(err)
        assert found, err
        name, size, sha256 = found.group(1), int(found.group(2)), found.group(3)
        capture = broker.workspace / name
        data = capture.read_bytes()
        assert (len(data), hashlib.sha256(data).hexdigest()) == (size, sha256)
        assert not list(broker.workspace.glob("*.part"))
        nsys = shutil.which("nsys")
        if nsys is not None:
            stats = subprocess.run(
                [nsys, "stats", "--report", "cuda_gpu_kern_sum", str(capture)],
                capture_output=True,
                text=True,
                timeout=WAIT,
                check=False,
            )
            assert stats.returncode == 0, stats.stderr
            assert "gemm" in stats.stdout.lower(), stats.stdout  # the matmul's kernel
    finally:
        stop_broker(broker)
