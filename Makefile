# The README's two commands, for a fresh Debian 12 machine (as root, or with sudo):
#   make demo   install what is missing, build, run the main job
#   make test   install what is missing, build, run every test
# Other targets: build, bench-free sanitizer run (test-asan), release build, format, clean.

PRESET ?= release
BUILD_DIR := build/$(PRESET)
DEPS_STAMP := build/.deps-installed

.PHONY: all deps build demo test test-asan release format clean

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
	./$(BUILD_DIR)/demo/kprof_demo

test: build
	ctest --preset $(PRESET)

test-asan:
	$(MAKE) test PRESET=asan

release:
	$(MAKE) build PRESET=release

format:
	git ls-files '*.cc' '*.h' | xargs clang-format -i

clean:
	rm -rf build
