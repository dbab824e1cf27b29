"""``python -m teachgrad.distributed.run -n 2 train.py [args]``: start a script on N ranks.

It runs ``mpiexec -n N python train.py args`` with the ``mpiexec`` of this
environment (the MPICH wheel's), one BLAS thread per rank, and the ranks'
output streamed to this terminal. ``--timeout`` stops a job that runs too long.

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

from .launcher import mpiexec_command, rank_environment


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m teachgrad.distributed.run",
        description="Run a training script on N ranks with MPICH's mpiexec.")
    parser.add_argument("-n", "--nproc", type=int, default=2, help="number of ranks (default 2)")
    parser.add_argument("-f", "--hostfile", help="MPICH hostfile for runs across machines")
    parser.add_argument("--timeout", type=float, default=None,
                        help="stop the whole job after this many seconds")
    parser.add_argument("script", help="the Python script every rank runs")
    parser.add_argument("script_args", nargs=argparse.REMAINDER, help="its arguments")
    options = parser.parse_args(argv)
    if options.nproc < 1:
        parser.error(f"-n must be at least 1, got {options.nproc}")
    if not os.path.isfile(options.script):
        parser.error(f"no script at {options.script}")
    command = mpiexec_command(options.nproc, [options.script, *options.script_args],
                              hostfile=options.hostfile)
    process = subprocess.Popen(command, env=rank_environment(), start_new_session=True)
    try:
        code = process.wait(timeout=options.timeout)
    except (subprocess.TimeoutExpired, KeyboardInterrupt) as stop:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
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
