# bench/medians.py: medians of repeated benchmark runs, grouped by key, for bench/compare, bench/guest-matrix and bench/killpriv.
"""As a module (PYTHONPATH=bench): Medians. As a command: numbers on stdin,
their median on stdout, 0 when there are none."""
import statistics
import sys


class Medians:
    """Samples grouped by key (any hashable, e.g. (workload, daemon, metric)).
    The median is over whatever rounds succeeded; a group without any has
    None, so a report can print "-" instead of a made-up figure."""

    def __init__(self):
        self.samples = {}

    def add(self, key, value):
        self.samples.setdefault(key, []).append(float(value))

    def count(self, key):
        return len(self.samples.get(key, []))

    def median(self, key):
        values = self.samples.get(key)
        return statistics.median(values) if values else None

    def best(self, names, key):
        """Of names, the one whose group key(name) has the highest median (the
        anchor a figure is judged against); None when none has a sample."""
        have = [n for n in names if self.median(key(n)) is not None]
        return max(have, key=lambda n: self.median(key(n)), default=None)


if __name__ == "__main__":
    numbers = [float(x) for x in sys.stdin.read().split()]
    print(statistics.median(numbers) if numbers else 0)
