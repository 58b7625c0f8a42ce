# The README's two commands, for a fresh Debian 12 machine (as root, or with sudo):
#   make demo   install what is missing, build, run the main job
#   make test   install what is missing, build, run every test
# Other targets: build, bench (benchmarks), test-asan (the suite under ASan and UBSan),
# test-tsan (the suite under TSan), check-clang (a clang build: thread-safety analysis), release,
# format, clean.

PRESET ?= release
BUILD_DIR := build/$(PRESET)
DEPS_STAMP := build/.deps-installed

.PHONY: all deps build demo test test-asan test-tsan test-tsan-ci test-arm64 board-bundle bench fuzz package gpu-bundle release format clean check-clang
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := arg_spec report_json elf_inspector

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
	./$(BUILD_DIR)/tests/bench/kprof_bench --markdown docs/BENCHMARKS.md
	./$(BUILD_DIR)/tests/bench/kprof_runner_bench
	./$(BUILD_DIR)/tests/bench/kprof_daemon_bench

# Cross-built for arm64 and tested under qemu-user. Not part of `make test`: the first run
# changes the machine's packages, and does so only with ARM64_SETUP=yes.
test-arm64:
	./deploy/test-arm64.sh $(if $(filter yes,$(ARM64_SETUP)),--setup) build/arm64

# The arm64 bundle and .deb for a Jetson board (JetPack 6 or 7) in build/board-bundle/, checked
# (glibc 2.35, size) and tested under qemu-user from the unpacked bundle alone. The first run on
# a machine changes its packages, as test-arm64's does: ARM64_SETUP=yes.
board-bundle: $(DEPS_STAMP)
	./deploy/board-bundle.sh $(if $(filter yes,$(ARM64_SETUP)),--setup) build/board build/board-bundle

# kprofd, its tests and the libraries they need, for a lent GPU machine (tests/gpu/run.sh).
gpu-bundle: build
	./deploy/gpu-bundle.sh $(BUILD_DIR) build/gpu-bundle

# libFuzzer on core's parsers, in a clang build tree of its own, FUZZ_SECONDS per target. New
# inputs collect in build/fuzz/corpus/TARGET; tests/fuzz/corpus/TARGET seeds them.
fuzz: deps
	./deploy/install-deps.sh --fuzz
	CC=clang CXX=clang++ cmake -S . -B build/fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DKPROF_FUZZ=ON -DKPROF_SANITIZE=address,undefined
	cmake --build build/fuzz --target $(addsuffix _fuzz,$(FUZZ_TARGETS)) kprof_test_modules
	for t in $(FUZZ_TARGETS); do \
	  mkdir -p build/fuzz/corpus/$$t && \
	  ./build/fuzz/tests/fuzz/$${t}_fuzz -max_total_time=$(FUZZ_SECONDS) \
	    build/fuzz/corpus/$$t tests/fuzz/corpus/$$t \
	    $$( [ $$t = elf_inspector ] && echo build/fuzz/tests/modules ) || exit 1; \
	done

# A .deb of kprofd, kprofd-worker, kprof, the client library and the unit, in build/PRESET.
package: build
	cd $(BUILD_DIR) && cpack

test-asan:
	$(MAKE) test PRESET=asan

# The whole tree built with clang, whose -Wthread-safety checks every ABSL_GUARDED_BY and
# ABSL_EXCLUSIVE_LOCKS_REQUIRED (GCC ignores them); warnings are errors, as in CI.
check-clang: $(DEPS_STAMP)
	CI=true cmake --preset clang
	cmake --build --preset clang

# ThreadSanitizer over Debian's uninstrumented Abseil and gRPC: tests/tsan makes their locks and
# completion queues visible to it and suppresses only what stays inside those libraries.
test-tsan:
	$(MAKE) test PRESET=tsan

# The stress mix (the preset's three rounds), the isolation, pipeline and farm tests and the
# executor's own (runners that are threads) under TSan, built alone: the TSan run to make before
# a change lands.
TSAN_CI_TARGETS := kprofd kprofd-worker kprof kprof_test_modules kprof_python \
  kprof_without_sandbox kprof_as_unit stress_test isolation_test pipeline_test batch_test server_test
test-tsan-ci: $(DEPS_STAMP)
	cmake --preset tsan
	cmake --build --preset tsan --target $(TSAN_CI_TARGETS)
	ctest --preset tsan -R 'StressTest|IsolationTest|ClientWorkersTest|Isolation\.|MemoryBounds|CacheShare|PipelineTest|FarmTest|BatchTest\.Updates|DeviceExecutorTest'

release:
	$(MAKE) build PRESET=release

format:
	git ls-files '*.cc' '*.h' | xargs clang-format -i

clean:
	rm -rf build
