"""Calling-thread CPU per log() of 10 metrics in logd's Python client (issue 12 target: <= 5 us).

Runs against a real daemon in a fresh data dir (auto-started through LOGD_BIN,
default: this repository's `node dist/daemon/cli.js`), logs N rows of 10
metrics, and prints:
  - the training thread's CPU per log() (time.thread_time, which excludes the
    writer thread that encodes and sends),
  - the wall time per log() call,
  - finish() time and the rows the daemon stored (must equal N).

    make python && .venv-python/bin/python bench/python_log_cost.py [N]
"""
import os
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    tmp = tempfile.mkdtemp(prefix="logd-pybench-")
    os.environ.update(LOGD_DIR=os.path.join(tmp, "data"), LOGD_RUNTIME_DIR=os.path.join(tmp, "rt"), LOGD_IDLE_TIMEOUT_MS="2000")
    os.environ.pop("LOGD_SERVICE", None)
    os.environ.setdefault("LOGD_BIN", "node %s" % os.path.join(ROOT, "dist", "daemon", "cli.js"))
    import logd

    try:
        t0 = time.perf_counter()
        run = logd.init(project="bench", name="python-log-cost")
        init_ms = (time.perf_counter() - t0) * 1000
        row = {"loss": 0.5, "acc": 0.9, "lr": 1e-3, "grad_norm": 1.5, "tokens": 4096,
               "m5": 0.1, "m6": 0.2, "m7": 0.3, "m8": 0.4, "m9": 0.5}
        for i in range(1000):  # warm-up: names checked, caches warm
            run.log(row)
        c0, w0 = time.thread_time(), time.perf_counter()
        for i in range(n):
            row["loss"] = 1.0 / (i + 1)
            run.log(row)
        c1, w1 = time.thread_time(), time.perf_counter()
        f0 = time.perf_counter()
        res = run.finish(timeout=60)
        finish_ms = (time.perf_counter() - f0) * 1000
        import subprocess

        show = subprocess.run(["node", os.path.join(ROOT, "dist", "daemon", "cli.js"), "show", run.id, "--json"],
                              capture_output=True, text=True, check=True)
        import json

        stored = json.loads(show.stdout)["historyRows"]
        print("python %s, logd Python client, %d log() calls of 10 metrics" % (sys.version.split()[0], n))
        print("  init (daemon auto-start included): %.0f ms" % init_ms)
        print("  calling-thread CPU per log():      %.2f us   (target <= 5 us)" % ((c1 - c0) / n * 1e6))
        print("  wall time per log() call:          %.2f us" % ((w1 - w0) / n * 1e6))
        print("  finish():                          %.0f ms  -> %s" % (finish_ms, res.state))
        print("  rows stored:                       %d of %d" % (stored, n + 1000))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
