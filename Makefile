# Entry points: `make` builds, `make check` runs every test, `make demo` shows ferryfsd serving a guest,
# `make fuzz` runs each libFuzzer target for FUZZ_SECONDS (default 300), `make install` installs,
# `make stack` fetches the current test stack (QEMU 10, Linux 6.12, Rust virtiofsd) into the cache.
BUILD ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 300
PREFIX ?= /usr/local
DESTDIR ?=

.PHONY: all deps stack check demo fuzz install clean

all: deps
	@test -f $(BUILD)/build.ninja || meson setup $(BUILD)
	ninja -C $(BUILD)

deps:
	@scripts/deps.sh

stack: deps
	scripts/stack.sh fetch

check: all
	scripts/check.sh

demo: all
	scripts/demo.sh

fuzz: deps
	FUZZ_BUILD=$(FUZZ_BUILD) fuzz/run.sh $(FUZZ_SECONDS)

# ferryfsd and ferryfs-load in PREFIX/bin, ferryfsd(1), and
# PREFIX/share/qemu/vhost-user/50-ferryfsd.json naming PREFIX/bin/ferryfsd.
install: all
	meson configure $(BUILD) -Dprefix=$(PREFIX)
	DESTDIR="$(DESTDIR)" meson install -C $(BUILD) --quiet

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
