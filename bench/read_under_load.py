"""A trainer's log() while a reader pulls a 1 M-row history in a loop (issue 33: no more than 10 % below the rate
with no reader). Prints figures, asserts nothing.

    make python && .venv-python/bin/python bench/read_under_load.py [--rows N] [--seconds S] [--rounds R]

A real daemon in a fresh data dir (LOGD_BIN, default this repository's `node dist/daemon/cli.js`). First one run
of N rows (default 1 000 000) x 10 metrics is logged and finished: the history the reader pulls. Then, R times,
alternating "no reader" and "reader" (a second process reading that run's whole history into pandas with
logd.Api, again and again, for as long as the trainer runs), a trainer process logs a new run for S seconds in two
ways:
  - flat out: log() of 10 metrics in a loop: rows/s, and the training thread's CPU per log();
  - paced: 2 000 rows/s (a fast trainer's step rate), each log() timed: p50 / p99 / max latency, and the
    finish() at the end (every row durable).
Both trainers check the daemon stored every row they logged.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

ap = argparse.ArgumentParser()
ap.add_argument("--rows", type=int, default=1_000_000)
ap.add_argument("--seconds", type=float, default=8.0)
ap.add_argument("--rounds", type=int, default=3)
a = ap.parse_args()

TRAINER = r"""
import json, sys, time, logd
mode, seconds = sys.argv[1], float(sys.argv[2])
run = logd.init(project="bench-load", name=mode)
row = {"m%d" % i: 0.5 for i in range(10)}
for i in range(2000):  # warm-up
    run.log(row)
lat = []
n = 0
t0 = time.perf_counter(); c0 = time.thread_time()
if mode == "flat":
    while True:
        for _ in range(1000):
            row["m0"] = n * 1e-3
            run.log(row)
            n += 1
        if time.perf_counter() - t0 >= seconds:
            break
else:
    period = 1.0 / 2000
    nxt = t0
    while True:
        now = time.perf_counter()
        if now - t0 >= seconds:
            break
        if now < nxt:
            time.sleep(nxt - now)
        nxt += period
        row["m0"] = n * 1e-3
        s = time.perf_counter()
        run.log(row)
        lat.append(time.perf_counter() - s)
        n += 1
wall = time.perf_counter() - t0; cpu = time.thread_time() - c0
f0 = time.perf_counter()
res = run.finish(timeout=120)
fin = time.perf_counter() - f0
lat.sort()
q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] * 1e6 if lat else 0.0
print(json.dumps({"id": run.id, "rows": n + 2000, "rate": n / wall, "cpu_us": cpu / n * 1e6, "p50_us": q(0.5), "p99_us": q(0.99),
                  "max_us": (lat[-1] * 1e6 if lat else 0.0), "finish_ms": fin * 1000, "state": res.state}))
"""

READER = r"""
import sys, time, logd
api = logd.Api()
n, t0 = 0, time.perf_counter()
while True:
    df = api.run(sys.argv[1]).history()
    assert len(df) == int(sys.argv[2]), len(df)
    n += 1
    print("read %d %.3f" % (n, time.perf_counter() - t0), flush=True)
"""


def main() -> None:
    tmp = tempfile.mkdtemp(prefix="logd-readload-")
    env = dict(os.environ, LOGD_DIR=os.path.join(tmp, "data"), XDG_RUNTIME_DIR=os.path.join(tmp, "rt"), LOGD_QUIET="1",
               LOGD_IDLE_TIMEOUT_MS="600000")
    env.pop("LOGD_SERVICE", None)
    env.setdefault("LOGD_BIN", "node %s" % os.path.join(ROOT, "dist", "daemon", "cli.js"))
    os.makedirs(env["XDG_RUNTIME_DIR"], mode=0o700)
    py = sys.executable
    cli = ["node", os.path.join(ROOT, "dist", "daemon", "cli.js")]
    try:
        print("bench/read_under_load: %d rows x 10 metrics to read; trainers of %.0f s; %d rounds; %d CPUs, load %s"
              % (a.rows, a.seconds, a.rounds, os.cpu_count(), " ".join("%.1f" % x for x in os.getloadavg())))
        t0 = time.perf_counter()
        made = subprocess.run([py, "-c", r"""
import sys, logd
run = logd.init(project="bench-load", name="big")
keys = ["m%d" % i for i in range(10)]
for s in range(int(sys.argv[1])):
    run.log({k: s * 0.001 + i for i, k in enumerate(keys)}, step=s)
run.finish(timeout=600)
print(run.id)
""", str(a.rows)], env=env, capture_output=True, text=True, check=True)
        big = made.stdout.strip().splitlines()[-1]
        print("  the run to read: %s, logged in %.1f s" % (big, time.perf_counter() - t0))
        results = {}
        for r in range(a.rounds):
            for with_reader in (False, True) if r % 2 == 0 else (True, False):
                reader = None
                if with_reader:
                    reader = subprocess.Popen([py, "-c", READER, big, str(a.rows)], env=env, stdout=subprocess.PIPE, text=True)
                    first = reader.stdout.readline()  # the reader is reading (its first read done) before the trainer starts
                    if not first.startswith("read "):
                        sys.exit("bench/read_under_load: the reader failed: %r" % first)
                for mode in ("flat", "paced"):
                    out = subprocess.run([py, "-c", TRAINER, mode, str(a.seconds)], env=env, capture_output=True, text=True)
                    if out.returncode != 0:
                        sys.exit("bench/read_under_load: the trainer failed:\n" + out.stderr)
                    got = json.loads(out.stdout.strip().splitlines()[-1])
                    shown = json.loads(subprocess.run(cli + ["show", got["id"], "--json", "--rows", "0"], env=env, capture_output=True,
                                                      text=True, check=True).stdout)
                    got["stored"] = shown["historyRows"]
                    results.setdefault((mode, with_reader), []).append(got)
                reads = ""
                if reader:
                    reader.terminate()
                    rest = reader.communicate(timeout=60)[0].strip().splitlines()
                    last = (rest[-1] if rest else first).split()
                    reads = "; the reader read the history %s times in %.1f s" % (last[1], float(last[2]))
                f = results[("flat", with_reader)][-1]
                p = results[("paced", with_reader)][-1]
                print("  round %d, %-9s: flat out %8.0f rows/s (%.2f us CPU a log()), paced p50/p99/max %.1f / %.1f / %.0f us, "
                      "finish %.0f ms; stored %d+%d of %d+%d%s"
                      % (r + 1, "reader" if with_reader else "no reader", f["rate"], f["cpu_us"], p["p50_us"], p["p99_us"], p["max_us"],
                         p["finish_ms"], f["stored"], p["stored"], f["rows"], p["rows"], reads))
        med = lambda xs: statistics.median(xs)
        print("  medians of %d rounds:" % a.rounds)
        for label, key, unit in (("flat-out log() rate", "rate", "rows/s"), ("CPU per log()", "cpu_us", "us"),
                                 ("paced log() p99", "p99_us", "us"), ("paced log() max", "max_us", "us"), ("paced finish()", "finish_ms", "ms")):
            x0 = med([g[key] for g in results[("flat" if key in ("rate", "cpu_us") else "paced", False)]])
            x1 = med([g[key] for g in results[("flat" if key in ("rate", "cpu_us") else "paced", True)]])
            print("    %-20s no reader %10.2f %-6s reader %10.2f %-6s (%+.1f %%)" % (label, x0, unit, x1, unit, (x1 / x0 - 1) * 100 if x0 else 0))
        lost = [(k, g["rows"] - g["stored"]) for k, gs in results.items() for g in gs if g["stored"] != g["rows"]]
        print("  every row stored" if not lost else "  ROWS MISSING: %s" % lost)
    finally:
        subprocess.run(cli + ["stop"], env=env, capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


main()
