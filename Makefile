# The two commands of the README: `make demo` and `make test`. Each sets up
# (apt packages + .venv + the kiln Python package), builds, and runs.
PRESET ?= release
BUILD := build/$(PRESET)
PY := .venv/bin/python

.PHONY: setup build demo test lint bench sanitize format clean

setup:
	@bash scripts/setup.sh

build: setup
	@cmake --preset $(PRESET) > /dev/null
	@cmake --build --preset $(PRESET)

demo: build
	@$(BUILD)/kiln_demo
	@echo
	@echo "== Training the digits MLP (64-128-10), eager C++"
	@$(BUILD)/kiln_train_digits

# pytest exits 5 when it collects no tests: that fails the target too.
test: build
	@cd $(BUILD) && ctest --output-on-failure -j2
	@$(PY) -m pytest -q tests/python

# Formatting (clang-format), no file over 700 lines, ruff and mypy over the
# Python: scripts/lint.sh says what failed and why. CI runs it after make test.
lint: setup
	@bash scripts/lint.sh

# The C++ kernel choices (one thread); then every framework side by side on
# W1, W2 and W3, each in its own process (bench/run_all.py: kiln eager and
# compiled from Python and C++, PyTorch, ONNX Runtime, TensorFlow, JAX, MXNet,
# tinygrad), at 1 thread and at 2, with ratios to PyTorch eager, the fastest
# other framework and the measured roofline; .bench/results.json and .png.
# bench/setup_frameworks.sh first puts the other frameworks into
# .bench/venv-* (skipped when done; one that cannot install is reported).
# Last, the compiler's goals (W1, W2 against ONNX Runtime, PyTorch and the
# FP32 peak, bench/compiled_models.py). run_all.py and compiled_models.py
# each rewrite their own section of bench/RESULTS.md with what they measured.
# Then symbolic against static graphs (bench/symbolic_shapes.py: W1 at batch
# 1 and 64, W2 at batch 1), and W4, the LSTM language model, at batch 1 and
# 32 against PyTorch (eager, jit.script, torch.compile) and ONNX Runtime at 1
# and 2 threads (bench/rnn_w4.py, a process per thread count; it rewrites its
# own section of bench/RESULTS.md). Last, real models (bench/real_models.py):
# W5 (transformer encoder) and W6 (ResNet-18, MobileNetV3-Small) at batch 1
# and 8, kiln compiled (Python and the saved .kiln through `kiln bench`)
# against PyTorch eager, torch.compile and ONNX Runtime on kiln's export, and
# pretrained ONNX models (PP-OCR and those of .cache/onnx-models) against
# ONNX Runtime, at 1 and 2 threads, each framework in a process pinned to
# that many cores; goals <= 0.8x ONNX Runtime and <= 0.5x PyTorch eager
# (its own section of bench/RESULTS.md; --quick to try it). run_all.py pins
# its runners the same way. Then threads per step at batch 1 (bench/threads.py:
# small models at 1 thread, at 2 with kiln choosing per step, at 2 on every
# step; beside a busy loop too, with kiln's busy-team watch on and off). Then the dependency engine (bench/engine.py:
# d2l's async microbenchmark, async against sync mode, two matmul chains on
# two workers against serial). Last, data-parallel training (bench/distributed.py:
# W1 under DistributedDataParallel on 1 and 2 ranks, one thread each, and the
# share of the all-reduce time backward hides). eager_python.py and
# hybrid_python.py run alone.
bench: build
	@OMP_NUM_THREADS=1 $(BUILD)/bench/kiln_bench_kernels
	@echo
	@bash bench/setup_frameworks.sh
	@$(PY) bench/run_all.py --threads 1,2
	@echo
	@OMP_NUM_THREADS=1 $(PY) bench/compiled_models.py
	@echo
	@OMP_NUM_THREADS=1 $(PY) bench/symbolic_shapes.py
	@echo
	@$(PY) bench/rnn_w4.py --threads 1,2
	@echo
	@$(PY) bench/real_models.py --threads 1,2
	@echo
	@$(PY) bench/threads.py --spin default,nowatch --load
	@echo
	@$(PY) bench/engine.py
	@echo
	@$(PY) bench/distributed.py

# The C++ suite under AddressSanitizer and UBSan: not part of make test, but
# CI runs it last. From scratch on 2 cores without ccache it costs about 10.5
# CPU-minutes to build and 2 to run (4500 tests). halt_on_error: undefined
# behaviour fails the run (by default UBSan only prints and goes on).
sanitize: setup
	@cmake --preset debug > /dev/null
	@cmake --build --preset debug --target kiln_tests
	@UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 build/debug/tests/cpp/kiln_tests --gtest_brief=1

format:
	@clang-format -i $$(git ls-files '*.cpp' '*.h')

clean:
	rm -rf build
