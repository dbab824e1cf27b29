"""teachgrad.bench.results_dir: the stored results are found wherever a notebook runs."""
from pathlib import Path

import pytest

from teachgrad import bench
from teachgrad.bench import locate

ROOT = Path(__file__).resolve().parents[2]


def test_found_next_to_the_package_from_any_folder(tmp_path, monkeypatch):
    monkeypatch.delenv(locate.ENV_VAR, raising=False)
    monkeypatch.chdir(tmp_path)  # like build/learner/ of a clone somewhere else
    assert bench.results_dir() == ROOT / "benchmarks" / "results"
    assert bench.results_file("compile_speed.json").is_file()


def test_the_environment_variable_wins(tmp_path, monkeypatch):
    (tmp_path / "mine.json").write_text("{}")
    monkeypatch.setenv(locate.ENV_VAR, str(tmp_path))
    assert bench.results_dir() == tmp_path
    assert bench.results_file("mine.json") == tmp_path / "mine.json"


def test_a_variable_that_is_not_a_folder_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv(locate.ENV_VAR, str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        bench.results_dir()


def test_no_clone_anywhere_names_the_fix(tmp_path, monkeypatch):
    monkeypatch.delenv(locate.ENV_VAR, raising=False)
    monkeypatch.setattr(locate, "_candidates", lambda: [tmp_path / "benchmarks" / "results"])
    with pytest.raises(FileNotFoundError, match="set TEACHGRAD_RESULTS"):
        bench.results_dir()


def test_a_missing_file_names_the_folder(monkeypatch):
    monkeypatch.delenv(locate.ENV_VAR, raising=False)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        bench.results_file("no_such_benchmark.json")


@pytest.mark.parametrize("name", ["", "../secrets.json", "sub/file.json", 3])
def test_only_plain_file_names(name):
    with pytest.raises(ValueError, match="file name"):
        bench.results_file(name)
