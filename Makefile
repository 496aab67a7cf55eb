# Entry points: `make` builds, `make check` runs every test, `make demo` shows ferryfsd serving a guest,
# `make fuzz` runs each libFuzzer target for FUZZ_SECONDS (default 300).
BUILD ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 300

.PHONY: all deps check demo fuzz clean

all: deps
	@test -f $(BUILD)/build.ninja || meson setup $(BUILD)
	ninja -C $(BUILD)

deps:
	@scripts/deps.sh

check: all
	scripts/check.sh

demo: all
	scripts/demo.sh

fuzz: deps
	FUZZ_BUILD=$(FUZZ_BUILD) fuzz/run.sh $(FUZZ_SECONDS)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
