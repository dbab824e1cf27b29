"""Start JupyterLab on the chapters: the learner edition by default, the reference on request.

    .venv/bin/python scripts/lab.py                 # build/learner/ (made or refreshed first)
    .venv/bin/python scripts/lab.py --solutions     # notebooks/, every solution filled in
    .venv/bin/python scripts/lab.py --dry-run       # print the command, start nothing
    .venv/bin/python scripts/lab.py -- --port 9999  # anything after -- goes to jupyter lab

``make lab`` and ``make lab-solutions`` call this script. The learner edition
(solutions replaced by stubs, outputs cleared; see scripts/make_learner.py) is
written into build/learner/ when it is missing or older than any reference
notebook or the stubbing rules. As root, common in containers, JupyterLab
refuses to start unless given ``--allow-root``, so the script adds it there.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "notebooks"
LEARNER = ROOT / "build" / "learner"
#: Files whose change makes the learner edition stale, beside the notebooks themselves.
STUB_RULES = (ROOT / "teachgrad" / "exercises" / "edition.py", ROOT / "scripts" / "make_learner.py")


def chapters(folder: Path = REFERENCE) -> list[Path]:
    """The chapter notebooks of the reference edition, in order."""
    return sorted(folder.glob("[0-9]*.ipynb"))


def stale_learner_notebooks(reference: Sequence[Path], learner_dir: Path = LEARNER) -> list[Path]:
    """Reference notebooks whose learner edition is missing or older than its sources."""
    rules = max((p.stat().st_mtime for p in STUB_RULES if p.exists()), default=0.0)
    stale = []
    for source in reference:
        target = learner_dir / source.name
        if not target.exists() or target.stat().st_mtime < max(source.stat().st_mtime, rules):
            stale.append(source)
    return stale


def ensure_learner_edition(learner_dir: Path = LEARNER) -> list[Path]:
    """Write the learner edition of every stale chapter; returns the notebooks rewritten."""
    stale = stale_learner_notebooks(chapters(), learner_dir)
    if stale:
        sys.path.insert(0, str(ROOT / "scripts"))
        from make_learner import make_learner_edition

        make_learner_edition(stale, learner_dir)
    return stale


def jupyter_lab_command(folder: Path, *, as_root: bool, extra: Sequence[str] = ()) -> list[str]:
    """The command line that starts JupyterLab on ``folder``."""
    command = [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={folder}"]
    if as_root:
        command.append("--allow-root")  # JupyterLab refuses root without it
    return command + list(extra)


def is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--solutions", action="store_true",
                        help="open the reference edition (notebooks/) with every solution")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the command instead of running it")
    parser.add_argument("extra", nargs="*", help="arguments passed on to jupyter lab")
    args = parser.parse_args(argv)
    if args.solutions:
        folder = REFERENCE
        print("Opening the reference edition (notebooks/): every solution is filled in.")
    else:
        folder = LEARNER
        written = ensure_learner_edition(folder)
        if written:
            print(f"Wrote the learner edition of {len(written)} chapter(s) into "
                  f"{folder.relative_to(ROOT)}/")
        print(f"Opening the learner edition ({folder.relative_to(ROOT)}/). "
              "The reference, with solutions: make lab-solutions")
    command = jupyter_lab_command(folder, as_root=is_root(), extra=args.extra)
    if args.dry_run:
        print(" ".join(command))
        return 0
    if shutil.which(command[0]) is None and not Path(command[0]).exists():
        print(f"cannot find {command[0]}", file=sys.stderr)
        return 1
    os.execv(command[0], command)  # JupyterLab takes over this process (Ctrl-C stops it)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
