# bench/runs.py: the figures of one bench/compare runs.csv row, with those derived from the load generator's CPU; for bench/compare and bench/targets.py.
"""As a module (PYTHONPATH=bench): row_figures."""

HOST_COLUMNS = ("host", "host-pread", "host-qd")


def row_figures(row, names):
    """The figures of an ok runs.csv row: each of names the row has, as a
    float, and, when the row has the load generator's CPU per op, load_busy
    (the share of one CPU it used) and, except for the host column (whose
    daemon CPU is that same loop's), both_cpu_us_per_op (daemon plus load
    generator). Runs written before the load generator's CPU was recorded
    lack the column, and a failed measure is negative: neither is derived."""
    figures = {n: float(row[n]) for n in names if row.get(n) not in (None, "")}
    load = float(row.get("load_cpu_us_per_op") or -1)
    if load >= 0:
        figures["load_cpu_us_per_op"] = load
        figures["load_busy"] = float(row["ops_per_sec"]) * load / 1e6
        if row["daemon"] not in HOST_COLUMNS:
            figures["both_cpu_us_per_op"] = float(row["daemon_cpu_us_per_op"]) + load
    return figures
