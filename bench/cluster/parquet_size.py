"""The yardstick for the shared store's size (issue 37): the rows bench/cluster
writes, as zstd-compressed Parquet, in bytes per point.

The rows the simulation writes (bench/cluster/sim.ts), made as a trainer's
would be: for each node n and rank r, steps 0..rows-1, metric m of step s =
sin(s / 100 + m) + n plus the rank's own noise (the simulation's values are
the same on every rank of a node, which Parquet would store nearly for free,
and no job logs that), rounded to float32 as a metric taken from a float32
tensor is, and a time per step (each 200 ms tick's rows share its time).
PostgreSQL's size does not depend on the values (the chunks are stored
uncompressed); Parquet's does. Laid out as a table of one row per rank and step (run id, step, time,
then one float64 column per metric), the layout that Parquet compresses best;
written with pyarrow, zstd, default level, 1 M rows per row group.

    .venv-python/bin/python bench/cluster/parquet_size.py --nodes 16 --ranks 8 --metrics 100 --rows 400 [--rate 10]

Prints the file's size and bytes per point (point = one metric's value at
one step of one rank), to set beside `bench/cluster/run.js`'s figure.
"""
import argparse
import math
import os
import tempfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=16)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--metrics", type=int, default=100)
    ap.add_argument("--rows", type=int, default=400, help="steps per rank")
    ap.add_argument("--rate", type=float, default=10.0, help="steps per second (for the times)")
    a = ap.parse_args()
    for k in ("nodes", "ranks", "metrics", "rows"):
        if getattr(a, k) <= 0:
            ap.error(f"--{k} must be a positive number")
    t0 = 1_764_300_000.0
    steps = np.arange(a.rows, dtype=np.float64)
    # Each 200 ms tick's rows share its time, as the simulation writes them.
    tick = max(1, round(a.rate * 0.2))
    times = t0 + np.floor(steps / tick) * 0.2
    tables = []
    for n in range(a.nodes):
        for r in range(a.ranks):
            cols = {
                "run_id": pa.array([f"n{n}r{r}"] * a.rows),
                "step": pa.array(steps),
                "time": pa.array(times),
            }
            rng = np.random.default_rng(n * 100_003 + r)
            for m in range(a.metrics):
                noisy = np.sin(steps / 100 + m) + n + 0.05 * rng.standard_normal(a.rows)
                cols[f"m{m}"] = pa.array(noisy.astype(np.float32).astype(np.float64))
            tables.append(pa.table(cols))
    table = pa.concat_tables(tables)
    points = a.nodes * a.ranks * a.rows * a.metrics
    with tempfile.TemporaryDirectory() as d:
        f = os.path.join(d, "rows.parquet")
        pq.write_table(table, f, compression="zstd", row_group_size=1 << 20)
        size = os.path.getsize(f)
    print(f"| {a.nodes} x {a.ranks} ranks x {a.metrics} metrics x {a.rows} steps ({points:,} points) as zstd Parquet | "
          f"{size / 2**20:.1f} MiB, {size / points:.2f} B per point |")
    if not math.isfinite(size / points):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
