# The two commands a newcomer needs:
#   make test   installs missing Debian packages, configures, builds, runs every test
#   make demo   same set-up, then builds only the library and the demo, and runs it
# BUILD picks the build folder; CMAKE_ARGS passes options (e.g. -DWICK_CUDA=OFF).
BUILD ?= build
CMAKE_ARGS ?=
JOBS ?= $(shell nproc)

.PHONY: test demo deps configure build clean

deps:
	@bash scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) -G Ninja $(CMAKE_ARGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# Verbose, so the per-case SKIPPED lines (CUDA cases on a machine without a GPU) show.
test: build
	@cd $(BUILD) && ctest --output-on-failure --verbose

# Only what the demo needs: the library (with CUDA only when a GPU is visible, see
# CMakeLists.txt) and the demo itself; tests, benchmarks and tools are left unbuilt.
demo: configure
	@cmake --build $(BUILD) -j $(JOBS) --target demo
	@$(BUILD)/examples/demo

clean:
	rm -rf $(BUILD)
