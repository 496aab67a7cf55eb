#!/usr/bin/env python3
# bench/perf_categories.py: sorts the samples of `perf script` (with call chains) of ferryfsd by what the daemon was doing.
"""Usage: perf script -i perf.data | bench/perf_categories.py [--cpu-us-per-op X --ops N --calls N]

Each sample goes to the first category one of its frames (leaf first) names: the request's own
system call (statx, pread, pwrite, openat, ...), the call eventfd's write (waking the driver), the
busy-poll spin, the waits' system calls (epoll_wait, getrusage), the read helper, or ferryfsd's
own code (ring walk, FUSE decoding and replies, the backend's bookkeeping: no system call in the
chain). With the daemon's CPU per op (ferryfs-load's daemon_cpu_us_per_op), each share is also
given in microseconds per op; with ops and calls, the call's share in microseconds per call."""
import argparse
import collections
import sys

# (a frame's symbol contains, category); the first match on the chain, leaf first, wins.
RULES = (
    ("worker_poll", "busy-poll: the spin for the next request"),
    ("vu_worker_wait_by_polling", "busy-poll: the spin for the next request"),
    ("helper_thread", "read helper thread"),
    ("read_split", "read helper: the queue thread's wait"),
    ("statx", "the op's system call"), ("fstatat", "the op's system call"),
    ("pread", "the op's system call"), ("pwrite", "the op's system call"),
    ("openat", "the op's system call"), ("unlinkat", "the op's system call"),
    ("getdents", "the op's system call"), ("mkdirat", "the op's system call"),
    ("eventfd_write", "the call: eventfd write, waking the driver"),
    ("libc_write", "the call: eventfd write, waking the driver"),
    ("epoll_wait", "waits: epoll_wait"), ("getrusage", "waits: getrusage"),
    ("futex", "futex"), ("sched_yield", "sched_yield"),
)
OWN = "ferryfsd's own code (ring, FUSE, backend)"


def classify(frames):
    for frame in frames:
        for key, name in RULES:
            if key in frame:
                return name
    if frames and frames[0].startswith("[k]"):
        return "other kernel"
    return OWN


def samples(lines):
    """Yields each sample's frames, leaf first, kernel ones marked [k]."""
    frames = []
    for line in lines:
        line = line.rstrip("\n")
        if not line.strip() or line[0] not in " \t":
            if frames:
                yield frames
            frames = []
            continue
        parts = line.split()
        if len(parts) >= 2:
            frames.append(("[k]" if "kernel" in parts[-1] else "") + parts[1])
    if frames:
        yield frames


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpu-us-per-op", type=float)
    ap.add_argument("--ops", type=float)
    ap.add_argument("--calls", type=float)
    args = ap.parse_args()
    cats = collections.Counter(classify(f) for f in samples(sys.stdin))
    total = sum(cats.values())
    if not total:
        print("perf_categories: no samples with call chains on stdin", file=sys.stderr)
        return 1
    for name, n in cats.most_common():
        share = n / total
        line = f"  {name:46} {100 * share:5.1f}%"
        if args.cpu_us_per_op:
            line += f" {share * args.cpu_us_per_op:6.2f} us/op"
            if name.startswith("the call") and args.ops and args.calls:
                line += f" ({share * args.cpu_us_per_op * args.ops / args.calls:.1f} us per call)"
        print(line)
    print(f"  {'samples':46} {total}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
