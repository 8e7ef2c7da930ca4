# The two commands a newcomer needs (see README.md):
#   make demo   install what is missing, build, and run the default experiment
#   make test   install what is missing, build, run every test through ctest, then a short
#               run of every libFuzzer target (FUZZ_SECONDS each, in build-fuzz; 0 skips it)
# Both call scripts/install-deps.sh first, which does nothing when all is installed.

BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
CTEST_FLAGS ?=
# Seconds each libFuzzer target runs at the end of `make test` (scripts/fuzz.sh; 0 skips it).
FUZZ_SECONDS ?= 10

.PHONY: all deps configure build test demo clean sanitize

all: build

deps:
	@scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS) $(CTEST_FLAGS)
	@if [ "$(FUZZ_SECONDS)" != 0 ]; then FUZZ_JOBS=$(JOBS) scripts/fuzz.sh $(FUZZ_SECONDS); fi

# The default experiment needs only these tools (not the tests, benchmarks or fuzzers).
DEMO_TARGETS = braid braid-generate braid-score braid-train braid-profile braid-meshplan braid-schedgen

demo: configure
	@cmake --build $(BUILD) -j $(JOBS) --target $(DEMO_TARGETS)
	@BRAID_BIN=$(BUILD)/bin scripts/demo.sh

# Address + undefined-behaviour sanitizer build and tests, in build-sanitize/.
sanitize:
	@$(MAKE) test BUILD=build-sanitize CMAKE_FLAGS="-DCMAKE_BUILD_TYPE=RelWithDebInfo -DBRAID_SANITIZE=address,undefined -DBRAID_CUDA=OFF"

clean:
	rm -rf $(BUILD)
