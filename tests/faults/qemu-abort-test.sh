#!/usr/bin/env bash
# Fault test (make check): a QEMU that aborts on its own assertion is named as QEMU's bug by run-guest.sh (exit 5) and by wait_console, and tests/lib/run-test.sh gives a test that failed after QEMU 10.0's known iotlb_to_section abort exactly one more run, marked for the summary, and no other failure any (another assertion included).
# QEMU 10.0's TCG aborted in CI at boot ("iotlb_to_section: Assertion ... failed") and took a cache
# test down with it; later the reboot loop, whose wait for the console did not see it (the line came
# mid-line, after the firmware's screen-clearing escapes). That abort cannot be had on demand, so
# the QEMU here is a script on PATH that prints the line the real one printed and dies of SIGABRT,
# as it did; and the tests run-test.sh runs are scripts that count their runs and end as each case
# needs.
# Exit 0 pass, 1 fail. Usage: qemu-abort-test.sh
set -uo pipefail
source "$(dirname "$0")/../lib/common.sh"

make_tmp
run_guest="$repo/tests/e2e/run-guest.sh"
run_test="$repo/tests/lib/run-test.sh"
assertion="qemu-system-x86_64: ../system/physmem.c:2678: iotlb_to_section: Assertion \`section_index < d->map.sections_nb' failed."

# A guest dir with no stack file: run-guest.sh takes the stable stack's
# qemu-system-x86_64 from PATH, which is the fake one below.
mkdir -p "$tmp/guest" "$tmp/bin"
printf '%s\n' "$assertion" >"$tmp/assertion"
: >"$tmp/guest/vmlinuz"
: >"$tmp/guest/initrd.img"
fake_qemu() { # BODY: the fake QEMU's shell code
    printf '#!/bin/bash\n%s\n' "$1" >"$tmp/bin/qemu-system-x86_64"
    chmod 755 "$tmp/bin/qemu-system-x86_64"
}
boot() { # -> rc; stderr in $tmp/run-guest.err
    local rc=0
    : >"$tmp/aborts"
    PATH="$tmp/bin:$PATH" FERRYFS_STACK= FERRYFS_QEMU_ABORTS="$tmp/aborts" \
        "$run_guest" --guest "$tmp/guest" --sock "$tmp/none.sock" --quiet --timeout 30 \
        --log "$tmp/console.log" 2>"$tmp/run-guest.err" || rc=$?
    echo "$rc"
}

fake_qemu "echo 'SeaBIOS (version 1.16.3)'; echo 'Booting from ROM...'; cat '$tmp/assertion' >&2; kill -ABRT \$\$"
rc=$(boot)
check "run-guest.sh exits 5 when QEMU aborted on its assertion (exit $rc)" test "$rc" = 5
check "run-guest.sh names it QEMU's bug" grep -q "QEMU aborted on its own assertion (a QEMU bug, not the daemon's): $assertion" "$tmp/run-guest.err"
check "run-guest.sh appends the assertion to \$FERRYFS_QEMU_ABORTS" grep -qxF "$assertion" "$tmp/aborts"

# The second abort seen in CI: the assertion came right after the escapes
# that clear the firmware's screen, on the same line of the console log.
mid_line="qemu-system-x86_64: system/physmem.c:2678: iotlb_to_section: Assertion \`section_index < d->map.sections_nb' failed."
printf '%s\n' "$mid_line" >"$tmp/assertion-mid"
fake_qemu "echo 'Booting from ROM...'; printf 'c\\033[?7l\\033[2J'; cat '$tmp/assertion-mid' >&2; kill -ABRT \$\$"
rc=$(boot)
check "an assertion in the middle of a console line is an abort too (exit $rc)" test "$rc" = 5
check "... and only the assertion goes to \$FERRYFS_QEMU_ABORTS" grep -qxF "$mid_line" "$tmp/aborts"

fake_qemu "echo 'Booting from ROM...'; echo 'qemu-system-x86_64: -chardev socket: Failed to connect' >&2; exit 1"
rc=$(boot)
check "a QEMU that fails without an assertion is no abort (exit $rc)" test "$rc" = 3
check "... and \$FERRYFS_QEMU_ABORTS stays empty" test ! -s "$tmp/aborts"

# A test waiting for a console line (wait_console, tests/lib/guest.sh) stops at
# once on the abort, and records it for run-test.sh, instead of waiting out its
# timeout while run-guest.sh may not have seen QEMU go yet.
printf 'SeaBIOS\nBooting from ROM...\n\033c\033[?7l\033[2J%s\n' "$mid_line" >"$tmp/console-x.log"
: >"$tmp/aborts"
not() { ! "$@"; }
( source "$repo/tests/lib/guest.sh"; FERRYFS_QEMU_ABORTS="$tmp/aborts" wait_console x 'never shown' 60 ) \
    >"$tmp/wait.out" 2>&1
rc=$?
check "wait_console fails on QEMU's abort (exit $rc)" test "$rc" = 1
# What it says tells the two ends apart, with no clock: a timeout says "within 60 s".
check "... at the abort, not at its timeout" not grep -q "within 60 s" "$tmp/wait.out"
check "... names it QEMU's bug" grep -q "QEMU aborted on its own assertion" "$tmp/wait.out"
check "... and appends it to \$FERRYFS_QEMU_ABORTS" grep -qxF "$mid_line" "$tmp/aborts"

# run-test.sh: each case is a test that ends with the codes given, one per
# run (the last repeats), and records an abort on the runs marked "a" (the
# known iotlb_to_section one), "u" (another assertion QEMU might fail on) or
# "au" (both, as two guests of one test could).
printf '%s\n' "qemu-system-x86_64: ../hw/virtio/vhost.c:1301: vhost_virtqueue_start: Assertion \`r >= 0' failed." \
    >"$tmp/assertion-other"
wrapped() { # OUTCOMES... (e.g. "1a 0"): -> "EXIT RUNS"; output in $tmp/wrapped.out
    local rc=0
    : >"$tmp/runs"
    cat >"$tmp/case-test.sh" <<EOF
#!/bin/bash
outcomes=($*)
n=\$(wc -l <"$tmp/runs")
echo run >>"$tmp/runs"
o=\${outcomes[\$n]:-\${outcomes[-1]}}
[[ \$o == *a* ]] && cat "$tmp/assertion" >>"\$FERRYFS_QEMU_ABORTS"
[[ \$o == *u* ]] && cat "$tmp/assertion-other" >>"\$FERRYFS_QEMU_ABORTS"
exit \${o%%[au]*}
EOF
    chmod 755 "$tmp/case-test.sh"
    "$run_test" "$tmp/case-test.sh" >"$tmp/wrapped.out" 2>&1 || rc=$?
    echo "$rc $(wc -l <"$tmp/runs")"
}
reruns() { grep -c '^FERRYFS-RERUN: ' "$tmp/wrapped.out"; }
check "a failure after the known abort runs again; the second run's pass stands" test "$(wrapped 1a 0)" = "0 2"
check "... and the output says why it ran again" \
    grep -q "run-test: case-test failed after QEMU 10.0's known TCG abort" "$tmp/wrapped.out"
check "... in one FERRYFS-RERUN line naming the test, for the summary ($(reruns))" test "$(reruns)" = 1
check "... with the assertion" \
    grep -qxF "FERRYFS-RERUN: case-test after QEMU's known abort ($assertion)" "$tmp/wrapped.out"
cp "$tmp/assertion-mid" "$tmp/assertion"
check "the known abort as wait_console records it mid-line reruns too" test "$(wrapped 1a 0)" = "0 2"
printf '%s\n' "$assertion" >"$tmp/assertion"
check "a failure after another QEMU assertion is the verdict, run once" test "$(wrapped 1u 0)" = "1 1"
check "... saying that assertion is not the known one" \
    grep -q "not the known iotlb_to_section one; no second run" "$tmp/wrapped.out"
check "... and no FERRYFS-RERUN line ($(reruns))" test "$(reruns)" = 0
check "the known abort beside another assertion is the verdict, run once" test "$(wrapped 1au 0)" = "1 1"
check "a failure without a QEMU abort is the verdict, run once" test "$(wrapped 1)" = "1 1"
check "a second known abort and failure is the verdict: no third run" test "$(wrapped 1a 1a 0)" = "1 2"
check "... and one FERRYFS-RERUN line ($(reruns))" test "$(reruns)" = 1
check "a skip is the verdict even with the known abort, run once" test "$(wrapped 77a 0)" = "77 1"
check "a pass is the verdict, run once" test "$(wrapped 0)" = "0 1"
finish
