# Entry points: `make` builds, `make check` runs every test, `make demo` shows ferryfsd serving a guest.
BUILD ?= build
ASAN_BUILD ?= build-asan

.PHONY: all deps check demo clean

all: deps
	@test -f $(BUILD)/build.ninja || meson setup $(BUILD)
	ninja -C $(BUILD)

deps:
	@scripts/deps.sh

check: all
	scripts/check.sh

demo: all
	scripts/demo.sh

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
