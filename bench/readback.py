"""Reading runs back (issue 33): a run's full history into pandas, and a table of runs. Prints figures, asserts
nothing.

    LOGD_DIR=... python bench/readback.py [--rows N] [--runs M] [--rounds R]

1. One run of N rows (default 1 000 000) x 10 metrics, logged by this process: logd.Api().run(id).history() into a
   pandas DataFrame, the first read after a daemon restart (cold: the run's log not in the daemon's memory, the page
   cache warm) and again (warm); the process's peak RSS growth against the frame's own size.
2. M runs (default 2 000) with 20 config keys and 10 summary keys: logd.Api().runs().to_pandas().
3. With LOGD_BENCH_STORE_URL (a shared PostgreSQL store, password included: the environment, not the command line):
   the daemon uploads both (it is started with LOGD_UPLOAD_URL), and the same reads go through
   logd.Api(store=URL): opening it (its reader process and first connection), history() and runs().to_pandas().
Needs numpy and pandas (the `read` extra) and the daemon this environment finds (started if none).
"""
import argparse
import os
import resource
import subprocess
import sys
import time

import logd

ap = argparse.ArgumentParser()
ap.add_argument("--rows", type=int, default=1_000_000)
ap.add_argument("--runs", type=int, default=2000)
ap.add_argument("--rounds", type=int, default=3)
a = ap.parse_args()


def rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


STORE = os.environ.get("LOGD_BENCH_STORE_URL", "")
if STORE:
    os.environ["LOGD_UPLOAD_URL"] = STORE  # for the daemon this process starts
    os.environ.setdefault("LOGD_NODE", "bench-node")
print("bench/readback: %d rows x 10 metrics; %d runs; load %s%s" % (a.rows, a.runs, " ".join("%.1f" % x for x in os.getloadavg()),
                                                                  "; and the shared store" if STORE else ""))
t0 = time.perf_counter()
run = logd.init(project="bench-read", name="big")
keys = ["m%d" % i for i in range(10)]
for s in range(a.rows):
    run.log({k: s * 0.001 + i for i, k in enumerate(keys)}, step=s)
run.finish(timeout=600)
print("  logged %d rows in %.1f s" % (a.rows, time.perf_counter() - t0))

logd_bin = os.environ.get("LOGD_BIN", "logd")
if not STORE:
    subprocess.run([logd_bin, "stop"], capture_output=True)  # cold: the next read is a new daemon's first
api = logd.Api()
for r in range(a.rounds):
    before = rss_mb()
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t = time.perf_counter()
    df = api.run(run.id).history()
    took = time.perf_counter() - t
    frame_mb = df.memory_usage(index=True, deep=False).sum() / 1e6
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("  history() -> pandas, %s: %.3f s for %d rows x %d columns (%.1f M points/s); frame %.0f MB, RSS %.0f -> %.0f MB (peak %.0f MB)"
          % ("cold" if r == 0 else "warm", took, len(df), df.shape[1], len(df) * 10 / took / 1e6, frame_mb, before, rss_mb(), max(peak, peak_before)))
    del df

t0 = time.perf_counter()
MAKER = r"""
import sys, logd
lo, hi = int(sys.argv[1]), int(sys.argv[2])
for i in range(lo, hi):
    rr = logd.init(project="bench-runs", name="r%d" % i, config={"c%d" % k: k * i for k in range(20)})
    rr.log({"s%d" % k: k + i for k in range(10)})
    rr.finish()
"""
# Made by 4 processes side by side (10 000 runs one after another take minutes).
cut = [a.runs * j // 4 for j in range(5)]
makers = [subprocess.Popen([sys.executable, "-c", MAKER, str(cut[j]), str(cut[j + 1])]) for j in range(4)]
if any(p.wait() != 0 for p in makers):
    sys.exit("bench/readback: making the runs failed")
print("  made %d runs in %.1f s" % (a.runs, time.perf_counter() - t0))
for r in range(a.rounds):
    t = time.perf_counter()
    df = api.runs(project="bench-runs").to_pandas()
    print("  runs().to_pandas(): %.3f s for %d runs x %d columns" % (time.perf_counter() - t, len(df), df.shape[1]))

if STORE:
    t0 = time.perf_counter()
    shared = logd.Api(store=STORE)
    print("  Api(store=...) opened in %.3f s" % (time.perf_counter() - t0))
    deadline = time.time() + 1800
    while True:  # the daemon uploads as it goes; wait for every row of the big run and every small run
        try:
            big = shared.run(run.id)
            n = len(shared.runs(project="bench-runs"))
            if big.state == "finished" and big.rows == a.rows and n == a.runs:
                break
        except LookupError:
            pass
        if time.time() > deadline:
            sys.exit("bench/readback: the shared store did not get every row within 30 minutes")
        time.sleep(2)
    print("  uploaded %d rows and %d runs to the shared store, %.1f s after they were made" % (a.rows, a.runs, time.perf_counter() - t0))
    for r in range(a.rounds):
        before = rss_mb()
        t = time.perf_counter()
        df = shared.run(run.id).history()
        took = time.perf_counter() - t
        print("  shared store: history() -> pandas: %.3f s for %d rows x %d columns (%.1f M points/s); RSS %.0f -> %.0f MB"
              % (took, len(df), df.shape[1], len(df) * 10 / took / 1e6, before, rss_mb()))
        del df
    for r in range(a.rounds):
        t = time.perf_counter()
        df = shared.runs(project="bench-runs").to_pandas()
        print("  shared store: runs().to_pandas(): %.3f s for %d runs x %d columns" % (time.perf_counter() - t, len(df), df.shape[1]))
    shared.close()
