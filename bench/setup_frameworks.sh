#!/usr/bin/env bash
# Creates one virtual environment per framework that bench/run_all.py sets
# beside kiln, under .bench/venv-<name> (git-ignored), each from the pinned
# requirements in bench/harness/requirements/<name>.txt. Frameworks whose pins
# conflict (MXNet 1.9.1 needs numpy < 1.24) thus never share an interpreter.
# PyTorch and ONNX Runtime run from the main .venv and need nothing here.
#
#   bash bench/setup_frameworks.sh [--retry] [name ...]     (default: all)
#
# Fast when already done: a venv whose stamp holds the hash of its
# requirements file (and of the base interpreter) is left alone. A framework
# that cannot be installed or imported does not fail the script: the reason
# goes to .bench/setup-<name>.failed, which the benchmark's table quotes as
# "not installed: <reason>". A failure is not retried with the same
# requirements (a run with no network would otherwise wait on pip every time)
# unless --retry is given. Logs: .bench/logs/setup-<name>.log.
# KILN_BENCH_DIR replaces .bench; KILN_BENCH_PYTHON, the base interpreter.
set -u

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BENCH="${KILN_BENCH_DIR:-$ROOT/.bench}"
REQUIREMENTS="$ROOT/bench/harness/requirements"
BASE_PYTHON="${KILN_BENCH_PYTHON:-python3}"
INSTALL_TIMEOUT_S="${KILN_BENCH_INSTALL_TIMEOUT_S:-1200}"

# What each venv must be able to do before it counts as installed: import the
# framework and run one op (tinygrad's CPU backend compiles with `clang`).
declare -A SMOKE=(
  [tensorflow]='import tensorflow as tf; print(tf.__version__, float(tf.reduce_sum(tf.ones(3))))'
  [jax]='import jax, jax.numpy as jnp; print(jax.__version__, float(jnp.ones(3).sum()))'
  [mxnet]='import mxnet as mx; print(mx.__version__, float(mx.nd.ones(3).sum().asscalar()))'
  [tinygrad]='import tinygrad; from tinygrad import Tensor; print(float(Tensor.ones(3).sum().numpy()))'
)

retry=0
names=()
for arg in "$@"; do
  case "$arg" in
    --retry) retry=1 ;;
    -h|--help) sed -n '2,16p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) names+=("$arg") ;;
  esac
done
if [ ${#names[@]} -eq 0 ]; then
  names=(tensorflow jax mxnet tinygrad)
fi

mkdir -p "$BENCH/logs" "$BENCH/bin"

# tinygrad calls a compiler named `clang`; Debian installs it as clang-NN.
# A link in .bench/bin (which run_all.py puts first on the runners' PATH)
# supplies the name without touching the system.
if ! command -v clang > /dev/null; then
  versioned="$(ls /usr/bin/clang-[0-9]* 2> /dev/null | sort -V | tail -n 1)"
  if [ -n "$versioned" ]; then
    ln -sf "$versioned" "$BENCH/bin/clang"
  fi
fi

requirements_hash() {
  { cat "$1"; "$BASE_PYTHON" -c 'import sys; print(sys.version)' 2> /dev/null; } | sha256sum | cut -d' ' -f1
}

# The last line of the log that says what went wrong, for the table.
failure_reason() {
  local line
  line="$(grep -E 'ERROR|Error|error:' "$1" | grep -v '^\s*$' | tail -n 1)"
  [ -n "$line" ] || line="$(tail -n 1 "$1")"
  echo "$line" | cut -c1-200
}

setup_one() {
  local name="$1" req="$REQUIREMENTS/$1.txt"
  local venv="$BENCH/venv-$name" failed="$BENCH/setup-$name.failed" log="$BENCH/logs/setup-$name.log"
  if [ ! -f "$req" ] || [ -z "${SMOKE[$name]:-}" ]; then
    echo "setup_frameworks: unknown framework '$name' (known: ${!SMOKE[*]})" >&2
    return 1
  fi
  local hash
  hash="$(requirements_hash "$req")"
  if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.requirements-sha256" 2> /dev/null)" = "$hash" ]; then
    echo "  $name: up to date ($(paste -sd' ' "$req"))"
    return 0
  fi
  if [ $retry -eq 0 ] && [ "$(head -n 1 "$failed" 2> /dev/null)" = "$hash" ]; then
    echo "  $name: failed before with these pins, not retried (--retry): $(sed -n 2p "$failed")"
    return 0
  fi

  echo "  $name: installing $(paste -sd' ' "$req") (log: ${log#$ROOT/})"
  rm -rf "$venv" "$failed"
  local reason=""
  {
    "$BASE_PYTHON" -m venv "$venv" &&
      timeout "$INSTALL_TIMEOUT_S" "$venv/bin/python" -m pip install --quiet -r "$req"
  } > "$log" 2>&1 || reason="$(failure_reason "$log")"
  if [ -z "$reason" ]; then
    PATH="$BENCH/bin:$PATH" timeout 300 "$venv/bin/python" -c "${SMOKE[$name]}" >> "$log" 2>&1 ||
      reason="installed but does not import and run: $(failure_reason "$log")"
  fi
  if [ -n "$reason" ]; then
    printf '%s\n%s\n' "$hash" "$reason" > "$failed"
    echo "  $name: NOT INSTALLED: $reason"
    return 0
  fi
  "$venv/bin/python" -m pip freeze > "$venv/frozen-requirements.txt" 2> /dev/null
  echo "$hash" > "$venv/.requirements-sha256"
  echo "  $name: installed"
}

echo "== Framework venvs for bench/run_all.py (.bench/venv-*)"
for name in "${names[@]}"; do
  setup_one "$name" || exit 1
done
