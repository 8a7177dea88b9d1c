"""Reading runs back, logd against MLflow (its file store and its SQLite store) and TensorBoard, each through its
own API, the same data, in one sitting (issue 33). Prints figures, asserts nothing.

    bash bench/readback-peers/setup.sh        # the peers' venv (PyPI), once
    .venv-python/bin/python bench/readback-peers/run.py [--steps N] [--runs M] [--rounds R]

Each tool writes one run of N steps x 10 metrics (default 100 000 steps: MLflow's SQLite store takes minutes at a
million) and M runs with 20 parameters and 10 metrics (default 1 000; TensorBoard has no table of runs), then each
read runs R times (default 3), each in a fresh process, alternated tool by tool: the full history into a pandas
DataFrame (logd: `Api().run(id).history()`; MLflow: `MlflowClient.get_metric_history` for each metric, into one
frame by step; TensorBoard: `EventAccumulator` with no size limit, `Scalars` of each tag, into one frame by step),
and the table of runs (logd: `Api().runs().to_pandas()`; MLflow: `mlflow.search_runs`). wandb is not here: reading
back needs its server (`wandb.Api()` asks it over HTTP), which this benchmark does not run.
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

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PEERS_PY = os.path.join(HERE, ".venv", "bin", "python")
TOOL = os.path.join(HERE, "tool.py")
TOOLS = ["logd", "mlflow-file", "mlflow-sqlite", "tensorboard"]

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=100_000)
ap.add_argument("--runs", type=int, default=1000)
ap.add_argument("--rounds", type=int, default=3)
a = ap.parse_args()


def main():
    if not os.path.exists(PEERS_PY):
        sys.exit("bench/readback-peers: no %s; make it with `bash bench/readback-peers/setup.sh`" % PEERS_PY)
    tmp = tempfile.mkdtemp(prefix="logd-readpeers-")
    env = dict(os.environ, LOGD_DIR=os.path.join(tmp, "logd"), XDG_RUNTIME_DIR=os.path.join(tmp, "rt"), LOGD_QUIET="1",
               LOGD_IDLE_TIMEOUT_MS="600000", PYTHONWARNINGS="ignore")
    env.pop("LOGD_SERVICE", None)
    env.setdefault("LOGD_BIN", "node %s" % os.path.join(ROOT, "dist", "daemon", "cli.js"))
    os.makedirs(env["XDG_RUNTIME_DIR"], mode=0o700)
    py = {t: sys.executable if t == "logd" else PEERS_PY for t in TOOLS}

    def call(what, tool, extra=()):
        d = os.path.join(tmp, tool)
        os.makedirs(d, exist_ok=True)
        r = subprocess.run([py[tool], TOOL, what, tool, d, *extra], env=env, capture_output=True, text=True, timeout=3600)
        if r.returncode != 0:
            sys.exit("bench/readback-peers: %s %s failed:\n%s" % (what, tool, r.stderr[-3000:]))
        return json.loads(r.stdout.strip().splitlines()[-1])

    try:
        print("bench/readback-peers: %d steps x 10 metrics, %d runs, %d rounds; %d CPUs, load %s"
              % (a.steps, a.runs, a.rounds, os.cpu_count(), " ".join("%.1f" % x for x in os.getloadavg())))
        ids = {}
        for t in TOOLS:
            w = call("write", t, ["--steps", str(a.steps), "--runs", str(a.runs)])
            ids[t] = w
            print("  %-13s wrote the history in %6.1f s, %d runs in %6.1f s" % (t, w["history_s"], a.runs if t != "tensorboard" else 0, w["runs_s"]))
        hist = {t: [] for t in TOOLS}
        runs = {t: [] for t in TOOLS}
        for r in range(a.rounds):
            order = TOOLS if r % 2 == 0 else TOOLS[::-1]
            for t in order:
                h = call("read-history", t, ["--ids", json.dumps(ids[t])])
                if h["rows"] != a.steps:
                    sys.exit("bench/readback-peers: %s read %d rows of %d" % (t, h["rows"], a.steps))
                hist[t].append(h)
                rr = call("read-runs", t, ["--ids", json.dumps(ids[t])])
                if "none" not in rr and rr["rows"] != a.runs:
                    sys.exit("bench/readback-peers: %s listed %d runs of %d" % (t, rr["rows"], a.runs))
                runs[t].append(rr)
        want = sum(s * 0.001 + 3 for s in range(a.steps))
        print("  | tool | history into pandas (median; rounds) | vs logd | client memory growth | table of %d runs (median; rounds) | vs logd |" % a.runs)
        print("  |---|---|---|---|---|---|")
        base_h = statistics.median(x["seconds"] for x in hist["logd"])
        base_r = statistics.median(x["seconds"] for x in runs["logd"])
        for t in TOOLS:
            hs = [x["seconds"] for x in hist[t]]
            ok = all(abs(x["m3_sum"] - want) <= 1e-6 * abs(want) for x in hist[t])
            mh = statistics.median(hs)
            cells = ["%.3f s (%s)%s" % (mh, ", ".join("%.3f" % x for x in hs), "" if ok else " VALUES DIFFER"),
                     "%.1fx" % (mh / base_h), "%.0f MB" % statistics.median(x["rss_growth_mb"] for x in hist[t])]
            if "none" in runs[t][0]:
                cells += [runs[t][0]["none"], "-"]
            else:
                rs = [x["seconds"] for x in runs[t]]
                mr = statistics.median(rs)
                cells += ["%.3f s (%s)" % (mr, ", ".join("%.3f" % x for x in rs)), "%.1fx" % (mr / base_r)]
            print("  | %s | %s |" % (t, " | ".join(cells)))
    finally:
        subprocess.run(["node", os.path.join(ROOT, "dist", "daemon", "cli.js"), "stop"], env=env, capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


main()
