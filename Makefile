# The two commands of the README: `make demo` and `make test`. Each sets up
# (apt packages + .venv + the kiln Python package), builds, and runs.
PRESET ?= release
BUILD := build/$(PRESET)
PY := .venv/bin/python

.PHONY: setup build demo test bench sanitize format clean

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

# The C++ kernel choices, eager kiln from Python against eager PyTorch (W1
# and W2 at batch 1), then compiled kiln (hybridized, traced, and from a C++
# loop) against PyTorch eager, jit.script and jit.trace; then the compiler's
# performance goals (W1, W2 against ONNX Runtime, PyTorch and the measured FP32
# peak, bench/compiled_models.py); each on one thread.
bench: build
	@OMP_NUM_THREADS=1 $(BUILD)/bench/kiln_bench_kernels
	@echo
	@OMP_NUM_THREADS=1 $(PY) bench/eager_python.py
	@echo
	@OMP_NUM_THREADS=1 $(PY) bench/hybrid_python.py
	@echo
	@OMP_NUM_THREADS=1 $(PY) bench/compiled_models.py

# The C++ suite under AddressSanitizer and UBSan (slow; not part of make test).
sanitize: setup
	@cmake --preset debug > /dev/null
	@cmake --build --preset debug --target kiln_tests
	@build/debug/tests/cpp/kiln_tests --gtest_brief=1

format:
	@clang-format -i $$(git ls-files '*.cpp' '*.h')

clean:
	rm -rf build
