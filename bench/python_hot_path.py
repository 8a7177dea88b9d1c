"""The Python client's compiled hot path against its pure-Python one (issue 39), side by side in one sitting.

Each round runs, in fresh processes, once with the compiled path (logd/hot/) and once with LOGD_PURE_PYTHON=1,
their order alternated:
  - log(): bench/python_log_cost.py (the training thread's CPU per log() of 10 metrics, the crash journal on, a
    real daemon; it checks that the daemon stored every row);
  - print(): lines of ~70 characters paced at 10 000 a second for 2 s, the training thread's CPU per line with
    the console captured (init's default, journaled) and with console=False, in the same process; the capture's
    cost is the difference.
Prints each round and the medians. Asserts nothing.

    make python && .venv-python/bin/python bench/python_hot_path.py [--rounds 5] [--rows 200000]
"""
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def print_child() -> None:
    tmp = tempfile.mkdtemp(prefix="logd-hotbench-")
    os.environ.update(LOGD_DIR=os.path.join(tmp, "data"), LOGD_RUNTIME_DIR=os.path.join(tmp, "rt"), LOGD_IDLE_TIMEOUT_MS="2000",
                      LOGD_QUIET="1")
    os.environ.pop("LOGD_SERVICE", None)
    os.environ.setdefault("LOGD_BIN", "node %s" % os.path.join(ROOT, "dist", "daemon", "cli.js"))
    import logd

    lines = ["step %7d | loss %.5f | lr %.3e | tokens/s %8d | grad norm %.4f" % (i, 1 / (i + 1), 3e-4, 41000 + i, 1.5)
             for i in range(1000)]
    real = sys.stdout
    out = {}
    for on in (True, False, True, False):
        sys.stdout = open(os.devnull, "w")
        run = logd.init(project="bench", name="hot-print", console=on)
        for i in range(2000):
            print(lines[i % 1000])
        cpu, n = 0.0, 0
        end = time.perf_counter() + 2.0
        deadline = time.perf_counter()
        while time.perf_counter() < end:
            now = time.perf_counter()
            if deadline > now:
                time.sleep(deadline - now)
            deadline += 0.001
            c0 = time.thread_time()
            for j in range(10):
                print(lines[(n + j) % 1000])
            cpu += time.thread_time() - c0
            n += 10
        run.finish(timeout=30)
        sys.stdout.close()
        sys.stdout = real
        out.setdefault(on, []).append(cpu / n * 1e6)
    print("print on %.3f off %.3f path %s" % (min(out[True]), min(out[False]), logd.hot_path))


def main() -> None:
    rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 5
    rows = sys.argv[sys.argv.index("--rows") + 1] if "--rows" in sys.argv else "200000"
    res = {m: {"log": [], "on": [], "off": []} for m in ("c", "python")}
    load = lambda: open("/proc/loadavg").read().split()[0]  # noqa: E731
    print("python %s, %d rounds; %s UTC; load %s" % (sys.version.split()[0], rounds, time.strftime("%Y-%m-%d %H:%M", time.gmtime()), load()))
    for r in range(rounds):
        for mode in (("c", "python") if r % 2 == 0 else ("python", "c")):
            env = dict(os.environ)
            env.pop("LOGD_PURE_PYTHON", None)
            if mode == "python":
                env["LOGD_PURE_PYTHON"] = "1"
            log_out = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "python_log_cost.py"), rows], env=env,
                                     capture_output=True, text=True, check=True).stdout
            us = float(re.search(r"calling-thread CPU per log\(\):\s+([\d.]+)", log_out).group(1))
            stored = re.search(r"rows stored:\s+(\d+) of (\d+)", log_out)
            if stored.group(1) != stored.group(2):
                raise SystemExit("%s: the daemon stored %s of %s rows" % (mode, stored.group(1), stored.group(2)))
            p = subprocess.run([sys.executable, os.path.abspath(__file__), "--print-child"], env=env, capture_output=True,
                               text=True, check=True).stdout
            m = re.search(r"print on ([\d.]+) off ([\d.]+) path (.+)", p)
            on, off, path = float(m.group(1)), float(m.group(2)), m.group(3)
            if (mode == "c") != (path == "c"):
                raise SystemExit("round %d: asked for %s, the client ran %s" % (r + 1, mode, path))
            res[mode]["log"].append(us)
            res[mode]["on"].append(on)
            res[mode]["off"].append(off)
            print("round %d %-6s log() %.2f us | print() captured %.2f us, not captured %.2f us, capture's cost %.2f us"
                  % (r + 1, mode, us, on, off, on - off))
    print("\nmedians (training thread CPU)      compiled    pure Python   ratio")
    for k, label in (("log", "log() of 10 metrics, journaled"), ("on", "print(), captured and journaled"), ("off", "print(), console=False")):
        c, py = statistics.median(res["c"][k]), statistics.median(res["python"][k])
        print("  %-32s %7.2f us %10.2f us   %.2fx" % (label, c, py, py / c))
    cost = lambda m: statistics.median([a - b for a, b in zip(res[m]["on"], res[m]["off"])])  # noqa: E731
    print("  %-32s %7.2f us %10.2f us   %.2fx" % ("the capture's cost per line", cost("c"), cost("python"), cost("python") / cost("c")))
    print("load at the end %s" % load())


if __name__ == "__main__":
    if "--print-child" in sys.argv:
        print_child()
    else:
        main()
