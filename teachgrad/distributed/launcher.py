"""Start a script on N ranks under MPICH's ``mpiexec``, and gather what each rank did.

:func:`launch` is for notebooks and tests: it runs the job to the end (or to
its timeout), then returns a :class:`RunResult` with each rank's stdout and
stderr and the compute/communication intervals each rank recorded
(:mod:`.timeline`), which ``teachgrad.widgets.RankTimeline`` draws.
``python -m teachgrad.distributed.run`` is the same launch from a terminal.

Each rank gets one BLAS/OpenMP thread unless the caller set a number (as
``torchrun`` does): N ranks with N threads each would fight over the cores.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from .process_group import DistributedError
from .timeline import TRACE_DIR_ENV

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                    "NUMBA_NUM_THREADS")
_FAILURE_LINE = re.compile(r"\[teachgrad\.distributed\] rank (\d+) failed with (\w+): ?(.*)")


def find_mpiexec() -> str:
    """The ``mpiexec`` of this Python environment (the MPICH wheel puts it beside python)."""
    beside = Path(sys.executable).parent / "mpiexec"
    found = str(beside) if beside.exists() else shutil.which("mpiexec")
    if found is None:
        raise FileNotFoundError(
            "no mpiexec found beside this Python or on PATH. Fix: pip install "
            "'teachgrad[distributed]' (the mpich wheel provides mpiexec)")
    return found


def mpiexec_command(n: int, argv: Sequence[str], hostfile: str | None = None,
                    output_dir: str | None = None) -> list[str]:
    """The command line: ``mpiexec [-f hosts] -n N python argv...``."""
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"the number of ranks must be a positive int, got {n!r}")
    command = [find_mpiexec()]
    if hostfile is not None:
        command += ["-f", str(hostfile)]
    if output_dir is not None:  # one file per rank instead of interleaved lines
        command += ["-outfile-pattern", f"{output_dir}/out.%r",
                    "-errfile-pattern", f"{output_dir}/err.%r"]
    return command + ["-n", str(n), sys.executable, *argv]


def rank_environment(extra: dict | None = None) -> dict:
    """The environment for the ranks: this one, one thread per rank, plus ``extra``."""
    env = dict(os.environ)
    for name in THREAD_VARIABLES:
        env.setdefault(name, "1")
    env.update(extra or {})
    return env


@dataclass
class RunResult:
    """What a launched job did, rank by rank."""

    world_size: int
    returncode: int
    wall_time: float
    stdout: list[str] = field(default_factory=list)     # one string per rank
    stderr: list[str] = field(default_factory=list)
    timelines: list[list[dict]] = field(default_factory=list)  # recorded intervals per rank
    failed_rank: int | None = None   # the rank that raised first, if one did
    failure: str = ""                # its exception, one line
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def raise_for_status(self) -> "RunResult":
        """Raise :class:`DistributedError` naming the failed rank, if the job failed."""
        if self.timed_out:
            raise DistributedError(f"the job on {self.world_size} ranks timed out after "
                                   f"{self.wall_time:.1f} s and was stopped")
        if self.failed_rank is not None:
            raise DistributedError(f"rank {self.failed_rank} failed with {self.failure}")
        if self.returncode != 0:
            tail = "".join(self.stderr)[-2000:]
            raise DistributedError(f"the job exited with code {self.returncode}:\n{tail}")
        return self


def launch(script: str | Path | None = None, n: int = 2, *, source: str | None = None,
           args: Sequence[str] = (), timeout: float = 120.0, env: dict | None = None) -> RunResult:
    """Run a Python script (a path, or ``source`` text) on ``n`` ranks and gather the results.

    The job is killed after ``timeout`` seconds. Failures do not raise here: look
    at ``result.ok`` / ``result.failed_rank``, or call ``result.raise_for_status()``.
    """
    if (script is None) == (source is None):
        raise ValueError("pass either a script path or source=..., not both (and not neither)")
    if not timeout > 0:
        raise ValueError(f"timeout must be positive, got {timeout!r}")
    with tempfile.TemporaryDirectory(prefix="teachgrad-dist-") as folder:
        if source is not None:
            script = Path(folder, "script.py")
            script.write_text(source)
        elif not Path(script).is_file():
            raise FileNotFoundError(f"no script at {script}")
        command = mpiexec_command(n, [str(script), *args], output_dir=folder)
        ranks_env = rank_environment({TRACE_DIR_ENV: folder, **(env or {})})
        start = time.perf_counter()
        returncode, timed_out = _run(command, ranks_env, timeout)
        result = RunResult(n, returncode, time.perf_counter() - start, timed_out=timed_out)
        for r in range(n):
            result.stdout.append(_read(Path(folder, f"out.{r}")))
            result.stderr.append(_read(Path(folder, f"err.{r}")))
            trace = Path(folder, f"rank{r}.json")
            result.timelines.append(json.loads(trace.read_text())["events"] if trace.exists()
                                    else [])
    result.failed_rank, result.failure = first_failure(result.stderr)
    return result


def _run(command: list[str], env: dict, timeout: float) -> tuple[int, bool]:
    """Run ``command`` in its own process group; kill that group if it outlives ``timeout``."""
    process = subprocess.Popen(command, env=env, start_new_session=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        process.communicate(timeout=timeout)
        return process.returncode, False
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return process.returncode, True


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def first_failure(stderr_by_rank: Sequence[str]) -> tuple[int | None, str]:
    """The rank that raised on its own (not because another failed), and its error."""
    failures = []
    for text in stderr_by_rank:
        for match in _FAILURE_LINE.finditer(text):
            failures.append((int(match.group(1)), match.group(2), match.group(3)))
    original = [f for f in failures if f[1] != "RankFailedError"] or failures
    if not original:
        return None, ""
    rank, kind, message = min(original)
    return rank, f"{kind}: {message}".rstrip(": ")
