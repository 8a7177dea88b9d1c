"""A cold Python process, whole: `import logd; init(); log(); finish()` and exit, with no daemon running (the
sidecar is started by the process and waited for), each in a fresh data and runtime dir; wandb's offline run of the
same program beside it. Venvs alternate round by round; medians of wall time, and of what the process says of its
import, init() and finish().

    /usr/bin/python3 bench/cold_python.py --rounds 7 --venv /tmp/wv-old,/tmp/wv-new [--wandb bench/peers/.venv]

A venv is one with logd's wheel installed (its bin/python and bin/logd); --wandb a venv with wandb."""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

LOGD = r"""
import sys, time
t0 = time.perf_counter()
import logd
t1 = time.perf_counter()
run = logd.init(project="cold", name="c")
t2 = time.perf_counter()
run.log({"a": 1.0}, step=0)
res = run.finish()
t3 = time.perf_counter()
assert res.state == "finished", res
sys.stderr.write("FIGURES %.1f %.1f %.1f\n" % ((t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3))
"""

WANDB = r"""
import wandb
run = wandb.init(project="cold", name="c", mode="offline")
run.log({"a": 1.0}, step=0)
run.finish()
"""


def once(python: str, program: str, env_extra: dict, cwd: str) -> tuple:
    env = dict(os.environ, LOGD_QUIET="1", WANDB_SILENT="true", **env_extra)
    env.pop("LOGD_SERVICE", None)
    t = time.perf_counter()
    p = subprocess.run([python, "-c", program], env=env, cwd=cwd, capture_output=True, text=True, timeout=120)
    ms = (time.perf_counter() - t) * 1e3
    if p.returncode != 0:
        raise SystemExit("cold_python: %s exited %d: %s" % (python, p.returncode, p.stderr[-2000:]))
    figs = [float(x) for line in p.stderr.splitlines() if line.startswith("FIGURES ") for x in line.split()[1:]]
    return ms, figs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--venv", required=True, help="comma-separated venvs with logd's wheel installed")
    ap.add_argument("--wandb", default="", help="a venv with wandb, run beside them")
    a = ap.parse_args()
    venvs = [os.path.abspath(v) for v in a.venv.split(",") if v]
    a.wandb = os.path.abspath(a.wandb) if a.wandb else ""
    got = {}
    for r in range(a.rounds):
        for v in venvs:
            d = tempfile.mkdtemp(prefix="cold-")
            extra = {"LOGD_DIR": os.path.join(d, "data"), "LOGD_RUNTIME_DIR": os.path.join(d, "rt")}
            try:
                ms, figs = once(os.path.join(v, "bin", "python"), LOGD, extra, d)
                got.setdefault(v, []).append([ms] + figs)
            finally:
                subprocess.run([os.path.join(v, "bin", "logd"), "stop"], env=dict(os.environ, **extra), capture_output=True, timeout=60)
                shutil.rmtree(d, ignore_errors=True)
        if a.wandb:
            d = tempfile.mkdtemp(prefix="cold-wandb-")
            try:
                ms, _ = once(os.path.join(a.wandb, "bin", "python"), WANDB, {"WANDB_DIR": d}, d)
                got.setdefault("wandb", []).append([ms])
            finally:
                shutil.rmtree(d, ignore_errors=True)
    print("# cold Python process (%s, %d rounds, load average %s, %d cores)" % (
        time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), a.rounds, " ".join("%.1f" % x for x in os.getloadavg()), os.cpu_count()))
    print("\n| | whole process, ms (median; all) | import | init() | finish() |\n|---|---|---|---|---|")
    for k, rows in got.items():
        med = [statistics.median(col) for col in zip(*rows)]
        whole = ", ".join("%.0f" % x for x in sorted(r[0] for r in rows))
        rest = " | ".join("%.0f" % x for x in med[1:]) if len(med) > 1 else "| |"
        print("| %s | **%.0f** (%s) | %s |" % (k, med[0], whole, rest))
    if "wandb" in got:
        w = statistics.median(r[0] for r in got["wandb"])
        for k in venvs:
            print("%s: %.2fx faster than wandb's" % (k, w / statistics.median(r[0] for r in got[k])))


if __name__ == "__main__":
    sys.exit(main())
