# The README's two commands, for a fresh Debian 12 machine (as root, or with sudo):
#   make demo   install what is missing, build, run the main job
#   make test   install what is missing, build, run every test
# Other targets: build, bench (benchmarks), test-asan (the suite under ASan and UBSan), release,
# format, clean.

PRESET ?= release
BUILD_DIR := build/$(PRESET)
DEPS_STAMP := build/.deps-installed

.PHONY: all deps build demo test test-asan bench release format clean

all: build

# install-deps.sh is idempotent and fast when nothing is missing; the stamp only spares the
# dpkg queries on repeated runs, and is remade whenever the script changes.
$(DEPS_STAMP): deploy/install-deps.sh
	./deploy/install-deps.sh
	@mkdir -p $(dir $@) && touch $@

deps: $(DEPS_STAMP)

$(BUILD_DIR)/CMakeCache.txt: | $(DEPS_STAMP)
	cmake --preset $(PRESET)

build: $(DEPS_STAMP) $(BUILD_DIR)/CMakeCache.txt
	cmake --build --preset $(PRESET)

demo: build
	./demo/run-demo.sh $(BUILD_DIR)

test: build
	ctest --preset $(PRESET)

bench: build
	./$(BUILD_DIR)/tests/bench/kprof_runner_bench

test-asan:
	$(MAKE) test PRESET=asan

release:
	$(MAKE) build PRESET=release

format:
	git ls-files '*.cc' '*.h' | xargs clang-format -i

clean:
	rm -rf build
