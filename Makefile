# nearmem front door: thin wrappers around CMake and CTest.
#   make demo         install missing Debian packages, build, run `nearmem demo`
#   make test         install missing packages, build, run every test through CTest
#   make bench        run every benchmark suite -> bench/results/<suite>.json/.png + README.md
#   make bench-quick  the same with --quick -> bench/results/quick/
#   make sanitize     the test suite under AddressSanitizer + UBSan (build-asan/)
#   make tsan         the multi-threaded tests under ThreadSanitizer (build-tsan/)
#   make install      install headers, libraries, tools and nearmem.pc (PREFIX=/usr/local)
#   make format       clang-format every C source in place

BUILD   ?= build
JOBS    ?= $(shell nproc 2>/dev/null || echo 2)
PREFIX  ?= /usr/local
CMAKE_FLAGS ?=
CTEST_FLAGS ?=

.PHONY: all deps deps-bench configure build demo test bench bench-quick sanitize tsan install format clean

all: build

deps:
	@scripts/install-deps.sh

deps-bench:
	@scripts/install-deps.sh --bench

configure:
	@cmake -S . -B $(BUILD) -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_FLAGS) > $(BUILD).configure.log 2>&1 \
	  || { cat $(BUILD).configure.log; exit 1; }

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

demo: deps build
	@$(BUILD)/bin/nearmem demo

test: deps build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS) $(CTEST_FLAGS)

bench: deps deps-bench build
	@scripts/bench-all.sh $(BUILD) bench/results

bench-quick: deps deps-bench build
	@scripts/bench-all.sh $(BUILD) bench/results/quick --quick

sanitize: deps
	@$(MAKE) --no-print-directory build BUILD=build-asan \
	  CMAKE_FLAGS="-DCMAKE_BUILD_TYPE=RelWithDebInfo -DNEARMEM_SANITIZE=address,undefined $(CMAKE_FLAGS)"
	@cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j $(JOBS) -LE nosanitize $(CTEST_FLAGS)

tsan: deps
	@$(MAKE) --no-print-directory build BUILD=build-tsan \
	  CMAKE_FLAGS="-DCMAKE_BUILD_TYPE=RelWithDebInfo -DNEARMEM_SANITIZE=thread $(CMAKE_FLAGS)"
	@cd build-tsan && TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
	  ctest --output-on-failure -j $(JOBS) -L threads -LE nosanitize $(CTEST_FLAGS)

install: build
	@cmake --install $(BUILD)

format:
	@find include src tests bench tools -name '*.[ch]' -print0 | xargs -0 clang-format -i

clean:
	@rm -rf build build-asan build-tsan build.configure.log build-asan.configure.log build-tsan.configure.log
