# The two commands a new user needs: `make demo` and `make test`. Each installs what is missing,
# configures and builds, then does its job.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_ARGS ?=
export CCACHE_BASEDIR := $(CURDIR)

.PHONY: deps configure build test demo bench sanitize clean format

deps:
	@bash scripts/install-deps.sh

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_ARGS)

configure: $(BUILD)/CMakeCache.txt

build: deps configure
	cmake --build $(BUILD) -j$(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

demo: build
	bash scripts/demo.sh $(BUILD)

bench: deps
	cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)
	cmake --build build-release -j$(JOBS) --target ckptcheck ckptcheck-train ckptcheck_bench
	mkdir -p $(BUILD)
	./build-release/ckptcheck_bench --ckptcheck build-release/ckptcheck --out $(BUILD)/bench.json

# AddressSanitizer + UBSan over the hostile-input tests: every format reader, verify, the
# randomized corruption tests. The LibTorch CLI is not rebuilt under ASan (tests that run the
# binary are excluded); the readers and checks it calls are the same code.
SANITIZE_EXCLUDE := -Drill*:DistributedDrill*:Drift*:NegativeControls*:PinCommand*:PlanCommand*:ResumeRoundTrip*:TrainCommand*:VerifyCommandTest*
sanitize: deps
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCKPTCHECK_SANITIZE=ON $(CMAKE_ARGS)
	cmake --build build-asan -j$(JOBS) --target ckpt_core test_support
	$(MAKE) -C build-asan unit_tests/fast
	cd build-asan && CKPTCHECK_FUZZ_ITERATIONS=$${CKPTCHECK_FUZZ_ITERATIONS:-3000} \
	  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ./unit_tests --gtest_filter='$(SANITIZE_EXCLUDE)'

format:
	clang-format -i $$(git ls-files '*.cpp' '*.h')

clean:
	rm -rf $(BUILD) build-release build-asan
