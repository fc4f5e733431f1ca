"""bench/harness/results_md.py, the writer of bench/RESULTS.md: a script's
run replaces its own section and leaves the prose and the other script's
section as they were. Nothing is measured."""
import pathlib
import sys

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from harness import results_md  # noqa: E402


def two_sections(path):
    text = "\n\n".join([
        "# Results", "Prose before.",
        results_md.begin_marker("run_all"), "old run_all table", results_md.end_marker("run_all"),
        "## Compiled models", results_md.begin_marker("compiled_models"),
        "old compiled_models table", results_md.end_marker("compiled_models"),
        "Prose after."]) + "\n"
    path.write_text(text)
    return text


def test_replaces_one_section_and_keeps_the_other(tmp_path):
    path = tmp_path / "RESULTS.md"
    two_sections(path)
    results_md.write_section("run_all", "| a | b |\n|---|---:|\n| W1 | 1.5 |", path)
    text = path.read_text()
    assert results_md.section_of(text, "run_all").strip() == "| a | b |\n|---|---:|\n| W1 | 1.5 |"
    assert results_md.section_of(text, "compiled_models").strip() == "old compiled_models table"
    assert "old run_all table" not in text
    assert text.startswith("# Results\n\nProse before.\n\n")
    assert text.endswith("Prose after.\n")

    results_md.write_section("compiled_models", "new compiled_models table", path)
    again = path.read_text()
    assert results_md.section_of(again, "run_all") == results_md.section_of(text, "run_all")
    assert results_md.section_of(again, "compiled_models").strip() == "new compiled_models table"
    assert not (tmp_path / "RESULTS.md.tmp").exists()


def test_a_second_write_of_a_section_is_idempotent(tmp_path):
    path = tmp_path / "RESULTS.md"
    two_sections(path)
    results_md.write_section("run_all", "body", path)
    once = path.read_text()
    results_md.write_section("run_all", "body", path)
    assert path.read_text() == once


def test_missing_section_and_missing_file_are_appended_and_created(tmp_path):
    path = tmp_path / "new" / "RESULTS.md"
    results_md.write_section("run_all", "first", path)
    results_md.write_section("compiled_models", "second", path)
    text = path.read_text()
    assert results_md.section_of(text, "run_all").strip() == "first"
    assert results_md.section_of(text, "compiled_models").strip() == "second"
    assert text.index("first") < text.index("second")


def test_broken_markers_are_refused(tmp_path):
    end_first = results_md.end_marker("run_all") + "\n" + results_md.begin_marker("run_all")
    with pytest.raises(ValueError, match="broken pair"):
        results_md.replace_section(end_first, "run_all", "x")
    twice = (results_md.begin_marker("run_all") + results_md.end_marker("run_all")) * 2
    with pytest.raises(ValueError, match="more than once"):
        results_md.replace_section(twice, "run_all", "x")


def test_headings_are_demoted_outside_code_blocks():
    text = "## 1 thread\n\n```\n# a comment\n```\n### Goals"
    assert results_md.demote_headings(text) == "### 1 thread\n\n```\n# a comment\n```\n#### Goals"


def test_tee_prints_and_keeps_a_copy(capsys):
    with results_md.tee_stdout() as printed:
        print("| W1 batch 1 | 12.2 |")
    assert printed.getvalue() == "| W1 batch 1 | 12.2 |\n"
    assert capsys.readouterr().out == "| W1 batch 1 | 12.2 |\n"


def test_the_committed_file_has_its_sections():
    text = (BENCH / "RESULTS.md").read_text()
    for name in ("run_all", "compiled_models", "rnn_w4"):
        assert results_md.section_of(text, name), f"bench/RESULTS.md lacks the {name} section"
