# The two commands a new user needs: `make demo` and `make test`. Each installs what is missing,
# configures and builds, then does its job.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_ARGS ?=
# Objects are shared through ccache between clones and build dirs: paths relative to the checkout,
# and the build dir left out of the hash (it only changes the debug info's compile directory), so a
# fresh clone on a machine that built before compiles almost nothing.
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := 1
# New build dirs use Ninja (installed by deps): it starts a target's objects while the libraries it
# links are still compiling, where make waits for them. An existing build dir keeps its generator.
NEW_BUILD_GENERATOR = CMAKE_GENERATOR="$$(command -v ninja >/dev/null && echo Ninja || echo 'Unix Makefiles')"

.PHONY: deps configure build test test-fast demo bench sanitize clean format format-check layer-check fuzz soak package

deps:
	@bash scripts/install-deps.sh

$(BUILD)/CMakeCache.txt: | deps
	$(NEW_BUILD_GENERATOR) cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_ARGS)

configure: $(BUILD)/CMakeCache.txt

build: deps configure
	cmake --build $(BUILD) -j$(JOBS)

# Every test (ctest prints the time per label at the end: static, unit, torch, cli, install, slow,
# slurm).
test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

# The inner loop after an edit: rebuild what changed, then the static checks and every torch-free
# unit test (about a minute after a one-line change; `make test` before pushing).
test-fast: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS) -L fast

demo: build
	bash scripts/demo.sh $(BUILD)

bench: deps
	$(NEW_BUILD_GENERATOR) cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)
	cmake --build build-release -j$(JOBS) --target ckptcheck ckptcheck-train ckptcheck_bench ckptcheck_python
	mkdir -p $(BUILD)
	./build-release/ckptcheck_bench --ckptcheck build-release/ckptcheck --out $(BUILD)/bench.json

# AddressSanitizer + UBSan over every torch-free test (the unit_tests executable: every format
# reader, verify, the randomized corruption tests). Tests that run the built programs live in
# cli_tests and those that need LibTorch in torch_tests; neither is rebuilt under ASan (the readers
# and checks they call are the same code).
sanitize: deps
	$(NEW_BUILD_GENERATOR) cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCKPTCHECK_SANITIZE=ON $(CMAKE_ARGS)
	cmake --build build-asan -j$(JOBS) --target unit_tests
	cd build-asan && CKPTCHECK_FUZZ_ITERATIONS=$${CKPTCHECK_FUZZ_ITERATIONS:-3000} \
	  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 ./unit_tests

# Coverage-guided fuzzing (libFuzzer, clang) of every parser, each for FUZZ_SECONDS (see fuzz/README.md).
FUZZ_SECONDS ?= 60
fuzz: deps
	bash scripts/fuzz.sh --seconds $(FUZZ_SECONDS)

# K kill-and-resume cycles of the pilot in one root, verified before each resume, compared with an
# uninterrupted run at the end.
SOAK_CYCLES ?= 300
soak: build
	bash scripts/soak.sh --cycles $(SOAK_CYCLES) --bin $(BUILD)/ckptcheck

# The .deb (CPack, cmake/install.cmake): ckptcheck and ckptcheck-train, man page, completion;
# Depends from dpkg-shlibdeps. `cmake --install $(BUILD) --prefix P` installs the library too.
package: build
	cd $(BUILD) && cpack -G DEB

format:
	bash scripts/format.sh

# Both also run inside `make test` (ctest: format_check, layer_check).
format-check: deps
	bash scripts/format.sh --check

layer-check:
	python3 scripts/check_layers.py .

clean:
	rm -rf $(BUILD) build-release build-asan
