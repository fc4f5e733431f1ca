#!/usr/bin/env bash
# Installs everything kiln's build, tests and demo need on Debian 12, and
# creates the project's virtual environment (.venv). Idempotent: when all is
# present it only checks, in a few seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config clang-format
  libdnnl-dev libgtest-dev nlohmann-json3-dev libfmt-dev zlib1g-dev
  dataset-fashion-mnist
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
echo "setup: ok"
