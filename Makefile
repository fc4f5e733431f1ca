# The two commands of the README: `make demo` and `make test`. Each sets up
# (apt packages + .venv), builds, and runs.
PRESET ?= release
BUILD := build/$(PRESET)
PY := .venv/bin/python

.PHONY: setup build demo test format clean

setup:
	@bash scripts/setup.sh

build: setup
	@cmake --preset $(PRESET) > /dev/null
	@cmake --build --preset $(PRESET)

demo: build
	@$(BUILD)/kiln_demo

test: build
	@cd $(BUILD) && ctest --output-on-failure -j2

format:
	@clang-format -i $$(git ls-files '*.cpp' '*.h')

clean:
	rm -rf build
