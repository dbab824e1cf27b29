"""``python -m teachgrad.distributed.run -n 2 train.py [args]``: start a script on N ranks.

It runs ``mpiexec -n N python train.py args`` with the ``mpiexec`` of this
environment (the MPICH wheel's), one BLAS thread per rank, and the ranks'
output streamed to this terminal a whole line at a time, each line starting
with ``[rank N]`` (``--no-prefix`` leaves that out): lines of different ranks
never mix, even when this output is a pipe. ``--timeout`` stops a job that runs
too long.

Across machines (untested here; one machine is all this project has): list the
hosts in a file, one per line with an optional ``:slots``, make the same Python
environment and script reachable at the same path on each, then::

    python -m teachgrad.distributed.run --hostfile hosts -n 8 train.py
    # which runs: mpiexec -f hosts -n 8 python train.py
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TextIO

from .launcher import mpiexec_command, rank_environment

_POLL = 0.05  # seconds between looks at the ranks' output files


class LineForwarder:
    """Copies one rank's output file to ``sink`` whole lines at a time, each prefixed.

    ``mpiexec`` passes the ranks' output through in whatever pieces the pipes
    deliver, so two ranks' lines can be cut and mixed mid-line. Instead each rank
    writes to its own file, and only complete lines leave here, one ``write`` each.
    """

    def __init__(self, path: Path, sink: TextIO, prefix: str) -> None:
        self.path, self.sink, self.prefix = path, sink, prefix
        self.offset = 0
        self.partial = b""  # the start of a line whose end has not been written yet

    def pump(self, final: bool = False) -> None:
        """Forward every complete new line (on ``final``, the unfinished last one too)."""
        if self.path.exists():
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
            self.offset += len(data)
            lines = (self.partial + data).split(b"\n")
            self.partial = lines.pop()
        else:
            lines = []
        if final and self.partial:
            lines.append(self.partial)
            self.partial = b""
        if lines:
            self.sink.write("".join(f"{self.prefix}{line.decode(errors='replace')}\n"
                                    for line in lines))
            self.sink.flush()


def _forwarders(folder: str, n: int, prefix: bool) -> list[LineForwarder]:
    label = (lambda r: f"[rank {r}] ") if prefix else (lambda r: "")
    return ([LineForwarder(Path(folder, f"out.{r}"), sys.stdout, label(r)) for r in range(n)]
            + [LineForwarder(Path(folder, f"err.{r}"), sys.stderr, label(r)) for r in range(n)])


def _stream(process: subprocess.Popen, forwarders: list[LineForwarder],
            timeout: float | None) -> int:
    """Forward output while the job runs; its exit code (raises TimeoutExpired past timeout)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while process.poll() is None:
        for f in forwarders:
            f.pump()
        if deadline is not None and time.monotonic() > deadline:
            raise subprocess.TimeoutExpired(process.args, timeout)
        time.sleep(_POLL)
    for f in forwarders:
        f.pump(final=True)
    return process.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m teachgrad.distributed.run",
        description="Run a training script on N ranks with MPICH's mpiexec.")
    parser.add_argument("-n", "--nproc", type=int, default=2, help="number of ranks (default 2)")
    parser.add_argument("-f", "--hostfile", help="MPICH hostfile for runs across machines")
    parser.add_argument("--timeout", type=float, default=None,
                        help="stop the whole job after this many seconds")
    parser.add_argument("--no-prefix", action="store_true",
                        help="do not start each output line with [rank N]")
    parser.add_argument("script", help="the Python script every rank runs")
    parser.add_argument("script_args", nargs=argparse.REMAINDER, help="its arguments")
    options = parser.parse_args(argv)
    if options.nproc < 1:
        parser.error(f"-n must be at least 1, got {options.nproc}")
    if not os.path.isfile(options.script):
        parser.error(f"no script at {options.script}")
    with tempfile.TemporaryDirectory(prefix="teachgrad-run-") as folder:
        command = mpiexec_command(options.nproc, [options.script, *options.script_args],
                                  hostfile=options.hostfile, output_dir=folder)
        forwarders = _forwarders(folder, options.nproc, not options.no_prefix)
        process = subprocess.Popen(command, env=rank_environment(), start_new_session=True)
        try:
            code = _stream(process, forwarders, options.timeout)
        except (subprocess.TimeoutExpired, KeyboardInterrupt) as stop:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            for f in forwarders:
                f.pump(final=True)
            reason = "timed out" if isinstance(stop, subprocess.TimeoutExpired) else "was interrupted"
            print(f"teachgrad.distributed.run: the job {reason}; all ranks were stopped",
                  file=sys.stderr)
            return 124
    if code != 0:
        print(f"teachgrad.distributed.run: the job failed (exit code {code}); the line "
              "'[teachgrad.distributed] rank N failed with ...' above names the rank",
              file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
