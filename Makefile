# Entry points: `make` builds, `make check` runs the tests, `make check-long` them and their long parts (reference
# columns, the full reboot loop, longer fuzzing: tests/README.md), `make demo` shows ferryfsd serving a guest,
# `make fuzz` runs each libFuzzer target for FUZZ_SECONDS (default 300), `make install` installs,
# `make stack` fetches the current test stack (QEMU 10, Linux 6.12, Rust virtiofsd) into the cache,
# `make deb` builds the Debian package into DEB_OUT (`make deb-deps` installs its build tools).
# `make xfstests` runs xfstests on ferryfsd and both virtiofsd (tests/xfstests/README.md).
BUILD ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 300
PREFIX ?= /usr/local
DESTDIR ?=
DEB_OUT ?= build-deb

.PHONY: all deps stack check check-long demo fuzz install deb deb-deps clean xfstests

all: deps
	@test -f $(BUILD)/build.ninja || meson setup $(BUILD)
	ninja -C $(BUILD)

deps:
	@scripts/deps.sh

stack: deps
	scripts/stack.sh fetch

check: all
	scripts/check.sh

check-long: all
	FERRYFS_CHECK_LONG=1 scripts/check.sh

demo: all
	scripts/demo.sh

# xfstests' generic tests (FSTYP=virtiofs) in QEMU guests on ferryfsd, the Rust virtiofsd and QEMU's
# C virtiofsd, one column each, resumable: XFSTESTS names tests, ranges or groups (default the
# quick group), XFSTESTS_ARGS passes tests/xfstests/run.sh options (--daemons, --jobs, --fresh...;
# default: the first 250 tests of the list, a few hours under TCG; XFSTESTS_ARGS= runs them all);
# results and the table in $(BUILD)/xfstests.
XFSTESTS ?= quick
XFSTESTS_ARGS ?= --first 250
xfstests: all
	tests/xfstests/run.sh $(XFSTESTS_ARGS) $(XFSTESTS)

fuzz: deps
	FUZZ_BUILD=$(FUZZ_BUILD) fuzz/run.sh $(FUZZ_SECONDS)

# ferryfsd and ferryfs-load in PREFIX/bin, ferryfsd(1), and
# PREFIX/share/qemu/vhost-user/50-ferryfsd.json naming PREFIX/bin/ferryfsd.
install: all
	meson configure $(BUILD) -Dprefix=$(PREFIX)
	DESTDIR="$(DESTDIR)" meson install -C $(BUILD) --quiet

# ferryfs_VERSION_ARCH.deb, its .buildinfo/.changes and lintian.txt in DEB_OUT, built by
# dpkg-buildpackage in a temporary copy of the tree (scripts/deb.sh).
deb:
	scripts/deb.sh $(abspath $(DEB_OUT))

deb-deps:
	scripts/deb.sh deps

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD) $(DEB_OUT)
