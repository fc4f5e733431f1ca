#!/usr/bin/env bash
# `make lint`: the checks CI runs beside the tests. Every check runs; each
# names what failed and why, and the script exits 1 if any failed.
#   clang-format  C++ formatted as .clang-format says (clang-format 14, the
#                 one scripts/setup.sh installs; other versions format a few
#                 constructs differently)
#   file length   no tracked source, script or doc file over MAX_LINES lines
#                 (STYLE.md: files under ~600 lines; this is the hard cap)
#   ruff          the Python: pyflakes, pycodestyle, import order, bugbear,
#                 pyupgrade (pyproject.toml [tool.ruff])
#   mypy          the type hints of the kiln package (pyproject.toml
#                 [tool.mypy]). kiln._C, the nanobind extension, is Any to
#                 mypy: nanobind's stubgen, run on it, emits an invalid stub
#                 (the methods kiln/_tensor.py installs on Tensor come out as
#                 `<lambda> as __bool__`), and the ops kiln._ops makes at
#                 import time would be missing from it anyway.
# Needs the venv (scripts/setup.sh, or `make lint`, which runs it first).
set -uo pipefail
cd "$(dirname "$0")/.."

PY=.venv/bin/python
MAX_LINES=700
failed=()

# Tracked files of the given git pathspecs that exist (a file deleted or
# renamed in the working tree but not yet in the index is skipped).
tracked() {
  git ls-files -- "$@" | while IFS= read -r f; do [ -f "$f" ] && printf '%s\n' "$f"; done
}

echo "== clang-format ($(clang-format --version 2>/dev/null | grep -o 'version [0-9.]*' || echo 'not found'))"
if ! command -v clang-format > /dev/null; then
  echo "clang-format is not installed (scripts/setup.sh installs it)"
  failed+=(clang-format)
else
  mapfile -t cxx < <(tracked '*.cpp' '*.h')
  # One call over every file; each file that would change is named once.
  out=$(clang-format --dry-run --Werror "${cxx[@]}" 2>&1)
  rc=$?
  mapfile -t drift < <(sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: .*/\1/p' <<< "$out" | sort -u)
  for f in "${drift[@]}"; do
    echo "$f: not as clang-format writes it (fix: clang-format -i $f)"
  done
  if [ $rc -ne 0 ] && [ ${#drift[@]} -eq 0 ]; then
    echo "$out"  # clang-format failed for another reason (a bad .clang-format, ...)
  fi
  [ $rc -eq 0 ] || failed+=(clang-format)
fi

echo "== file length (at most $MAX_LINES lines)"
# What people write and read: code, build files, scripts, docs, IR pass
# tests. Not data: JSON, the generated list tests/onnx/passing.txt and the
# requirements lists (*.txt other than CMakeLists.txt), binary test models.
mapfile -t texts < <(tracked '*.cpp' '*.h' '*.py' '*.sh' '*.cmake' '*.cmake.in' \
  '*CMakeLists.txt' 'Makefile' '.ci/run' '*.md' '*.toml' '*.ir')
long=0
for f in "${texts[@]}"; do
  n=$(wc -l < "$f")
  if [ "$n" -gt "$MAX_LINES" ]; then
    echo "$f: $n lines (limit $MAX_LINES; split it)"
    long=1
  fi
done
[ $long -eq 0 ] || failed+=("file length")

echo "== ruff"
if ! $PY -m ruff check --output-format concise --no-fix; then
  echo "(ruff check --fix fixes the findings marked [*])"
  failed+=(ruff)
fi

echo "== mypy"
$PY -m mypy || failed+=(mypy)

if [ ${#failed[@]} -gt 0 ]; then
  echo "lint: FAILED: ${failed[*]}"
  exit 1
fi
echo "lint: ok"
