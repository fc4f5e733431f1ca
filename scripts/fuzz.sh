#!/usr/bin/env bash
# Fuzzes the .kiln model loader with libFuzzer (clang-16, ASan, UBSan) for
# SECONDS (default 60): installs the release build into build/fuzz/prefix,
# builds tests/fuzz against it, and runs from the seed corpus in
# tests/data/fuzz/model_file (new inputs go to build/fuzz/corpus, never into
# the source tree). Exits non-zero when the fuzzer finds a crash; the
# reproducer is left in build/fuzz/artifacts.
#
#   scripts/fuzz.sh            # 60 s, as ctest runs it
#   scripts/fuzz.sh 3600       # an hour, by hand
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_TO_RUN=${1:-60}
BUILD=${KILN_BUILD_DIR:-build/release}
OUT=build/fuzz

cmake --install "$BUILD" --prefix "$OUT/prefix" > /dev/null
LAUNCHER=()
command -v ccache > /dev/null && LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S tests/fuzz -B "$OUT/targets" -G Ninja -DCMAKE_CXX_COMPILER=clang++-16 \
  -DCMAKE_PREFIX_PATH="$PWD/$OUT/prefix" "${LAUNCHER[@]}" > /dev/null
cmake --build "$OUT/targets" -j 2 > "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }

mkdir -p "$OUT/corpus" "$OUT/artifacts"
# One process, 2 GB of memory at most, 4 MB inputs at most; libFuzzer prints
# its statistics at the end (the executions count goes in the issue note).
"$OUT/targets/fuzz_model_file" "$OUT/corpus" tests/data/fuzz/model_file \
  -max_total_time="$SECONDS_TO_RUN" -rss_limit_mb=2048 -max_len=4194304 \
  -artifact_prefix="$OUT/artifacts/" -print_final_stats=1 2>&1 | tail -25
