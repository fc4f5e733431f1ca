"""bench/RESULTS.md, rewritten one section at a time by the scripts `make
bench` runs.

The file is hand-written prose with generated sections between marker
comments:

    <!-- begin run_all: written by `make bench` (bench/run_all.py) -->

    ...

    <!-- end run_all -->

write_section(name, body) replaces what lies between one pair of markers and
leaves the rest of the file alone, so bench/run_all.py and
bench/compiled_models.py each own their section and one script's run never
erases the other's. A section the file lacks is appended at its end; a
missing file is created. The new file is written beside the old one and
renamed over it. This module imports nothing but the standard library.
"""
import contextlib
import datetime
import io
import os
import pathlib
import platform
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
RESULTS_MD = ROOT / "bench" / "RESULTS.md"


def begin_marker(name):
    return f"<!-- begin {name}: written by `make bench` (bench/{name}.py) -->"


def end_marker(name):
    return f"<!-- end {name} -->"


def replace_section(text, name, body):
    """`text` with the section `name` holding `body` (appended at the end
    when `text` has no such section). Raises ValueError when the markers are
    out of order or repeated."""
    begin, end = begin_marker(name), end_marker(name)
    block = f"{begin}\n\n{body.strip()}\n\n{end}"
    if text.count(begin) > 1 or text.count(end) > 1:
        raise ValueError(f"results_md: section {name!r} appears more than once")
    start, stop = text.find(begin), text.find(end)
    if start < 0 and stop < 0:
        return (text.rstrip("\n") + "\n\n" if text.strip() else "") + block + "\n"
    if start < 0 or stop < start:
        raise ValueError(f"results_md: section {name!r} has a broken pair of markers")
    return text[:start] + block + text[stop + len(end):]


def section_of(text, name):
    """The body of section `name` in `text`, or None."""
    begin, end = begin_marker(name), end_marker(name)
    start, stop = text.find(begin), text.find(end)
    if start < 0 or stop < start:
        return None
    return text[start + len(begin):stop].strip("\n")


def write_section(name, body, path=RESULTS_MD):
    """Replaces section `name` of the file at `path` with `body`."""
    path = pathlib.Path(path)
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    new = replace_section(old, name, body)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(new, encoding="utf-8")
    os.replace(temporary, path)
    return path


def demote_headings(text, levels=1):
    """Markdown headings one level (or `levels`) deeper, outside code blocks,
    so a script's own "## ..." fits under the file's section heading."""
    out, in_code = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if not in_code and line.startswith("#"):
            line = "#" * levels + line
        out.append(line)
    return "\n".join(out)


def stamp(host=None):
    """A line saying when and where the numbers were measured."""
    if host is None:
        host = {"cpu": platform.processor() or platform.machine(),
                "logical_cpus": os.cpu_count()}
    today = datetime.date.today().isoformat()
    return (f"Measured {today} on {host['cpu']}, {host['logical_cpus']} logical CPUs "
            f"(Python {platform.python_version()}).")


class _Tee(io.TextIOBase):
    def __init__(self, stream):
        self.stream, self.copy = stream, io.StringIO()

    def write(self, text):
        self.copy.write(text)
        return self.stream.write(text)

    def flush(self):
        self.stream.flush()


@contextlib.contextmanager
def tee_stdout():
    """Prints as usual and keeps a copy: `with tee_stdout() as out: ...`,
    then out.getvalue()."""
    tee = _Tee(sys.stdout)
    with contextlib.redirect_stdout(tee):
        yield tee.copy
