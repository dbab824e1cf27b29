# teachgrad: set-up and checks. Each target creates .venv when missing and installs
# what it needs; the install is skipped while pyproject.toml and setup.py are
# unchanged (a stamp file per set of extras in .venv/).
#
#   make lab       JupyterLab on the learner edition (build/learner/, made when missing
#                  or stale): exercises to fill in. Works as root too (--allow-root)
#   make lab-solutions  JupyterLab on the reference edition in notebooks/ (solutions in)
#   make test      every test: pytest over tests/ (browser tests included) and nbval
#                  over the reference notebooks
#   make book      the Jupyter Book site, from the notebooks' stored outputs
#   make learner   the learner edition of the notebooks, into build/learner/
#   make check-exercises  mutation-test the exercise checkers: every reference solution
#                  is mutated and each mutant run against its checker; fails on any
#                  surviving mutant not listed in scripts/equivalent_mutants.toml.
#                  Report: docs/mutation-report.md. CHECK_ARGS="--jobs 2" etc. (see
#                  scripts/check_exercises.py --help)
#   make course    an nbgrader course of the chapters, into course/ (COURSE=... elsewhere)
#   make bench     the benchmarks, results into benchmarks/results/
#   make clean     remove build outputs (keeps .venv)

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PACKAGE_FILES := pyproject.toml setup.py
NBVAL_SANITIZE := tests/nbval_sanitize.cfg
# Stored outputs were made with these (scripts/execute_notebooks.py): same hash
# order, cuda tensors in numba's CUDA simulator, and on x86-64 the same numeric kernels
# on every CPU: numpy's AVX2 loops (not its AVX-512 ones) and OpenBLAS's Haswell
# kernels, which round some sums differently from the AVX-512 ones. (The names are
# x86-64 ones: on other CPUs, such as aarch64, they should be ignored; not tried there.)
NOTEBOOK_ENV := PYTHONHASHSEED=0 TEACHGRAD_CUDA=sim \
  NPY_DISABLE_CPU_FEATURES="X86_V4 AVX512_ICL AVX512_SPR" OPENBLAS_CORETYPE=Haswell
BENCH_RESULTS := benchmarks/results
# extra arguments, e.g. make bench BENCH_ARGS=--quick
BENCH_ARGS ?=

.PHONY: lab lab-solutions test book learner course bench clean system-deps check-exercises

# -- environment -----------------------------------------------------------------------

$(BIN)/python:
	$(PYTHON) -m venv $(VENV) || { \
	  echo "'$(PYTHON) -m venv' failed; on Debian/Ubuntu: apt-get install python3-venv" >&2; exit 1; }
	$(BIN)/python -m pip install --quiet --upgrade pip

# One stamp per set of extras; rebuilt when the package metadata changes.
$(VENV)/.installed-%: $(PACKAGE_FILES) | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[$(subst +,$(comma),$*)]"
	touch $@

comma := ,

# System programs the tests use: graphviz's `dot` (GraphView renders with it, and
# tests check the pygraphviz fallback by hiding it) and Debian's chromium (browser
# tests; Playwright drives it and never downloads a browser of its own).
system-deps:
	@missing=""; \
	command -v dot >/dev/null 2>&1 || missing="$$missing graphviz"; \
	[ -x /usr/bin/chromium ] || missing="$$missing chromium fonts-dejavu-core"; \
	[ -x $(BIN)/python ] || $(PYTHON) -c "import ensurepip" 2>/dev/null || missing="$$missing python3-venv"; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing system packages:$$missing"; \
	  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing; \
	else \
	  echo "missing system packages:$$missing" >&2; \
	  echo "install them first, e.g.: sudo apt-get install$$missing" >&2; \
	  exit 1; \
	fi

# -- targets ---------------------------------------------------------------------------

# extra arguments for jupyter lab, e.g. make lab LAB_ARGS="--port 9999"
LAB_ARGS ?=

lab: $(VENV)/.installed-lab
	$(BIN)/python scripts/lab.py -- $(LAB_ARGS)

lab-solutions: $(VENV)/.installed-lab
	$(BIN)/python scripts/lab.py --solutions -- $(LAB_ARGS)

# Both test runs always happen; the target fails if either fails. Any pytest exit
# status other than 0 fails it, including 5 ("no tests collected").
test: system-deps $(VENV)/.installed-test+book
	@status=0; \
	$(BIN)/python -m pytest tests || status=$$?; \
	$(NOTEBOOK_ENV) $(BIN)/python -m pytest --nbval --nbval-current-env \
	  --nbval-sanitize-with $(NBVAL_SANITIZE) --nbval-cell-timeout=600 notebooks/ || status=$$?; \
	exit $$status

book: $(VENV)/.installed-book
	$(BIN)/jupyter-book build book/
	@echo "open book/_build/html/index.html"

learner: $(VENV)/.installed-test
	$(BIN)/python scripts/make_learner.py --out build/learner

# extra arguments, e.g. make check-exercises CHECK_ARGS="--exercise ch13.check_promote"
CHECK_ARGS ?=

check-exercises: $(VENV)/.installed-test
	$(NOTEBOOK_ENV) $(BIN)/python scripts/check_exercises.py --report docs/mutation-report.md $(CHECK_ARGS)

# The instructor's nbgrader course: config (kept once written) and source/ from the
# chapters; its gradebook and submissions are never touched (nor removed by `make clean`).
COURSE ?= course
# e.g. COURSE_ARGS="--assignment week1 --points 2 notebooks/01_why_ml_systems.ipynb"
COURSE_ARGS ?=

course: $(VENV)/.installed-lab+grading
	$(BIN)/python scripts/nbgrader_course.py --course $(COURSE) $(COURSE_ARGS)

bench: $(VENV)/.installed-test
	mkdir -p $(BENCH_RESULTS)
	$(BIN)/python -m teachgrad.bench --out $(BENCH_RESULTS) $(BENCH_ARGS)

clean:
	rm -rf build/ book/_build/ test-artifacts/ .pytest_cache/ .hypothesis/ *.egg-info
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -exec rm -rf {} +

# Re-run the reference notebooks in place, storing outputs and widget state (what nbval
# compares and the book shows). Run it after editing a notebook; commit the result.
.PHONY: notebooks
notebooks: $(VENV)/.installed-test
	$(NOTEBOOK_ENV) $(BIN)/python scripts/execute_notebooks.py
