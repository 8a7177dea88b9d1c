"""One tool's side of the reading-back comparison, in one fresh process (run by run.py; each tool in its own venv).

    python tool.py write logd|mlflow-file|mlflow-sqlite|tensorboard DIR --steps N --runs M
    python tool.py read-history|read-runs logd|mlflow-file|mlflow-sqlite|tensorboard DIR

Prints one JSON line on stdout. The data is the same for every tool: one run of N steps x 10 metrics (m0..m9, value
step * 0.001 + j at step `step`), and M runs with 20 parameters (config) and 10 metrics (one value each). A read
times only the read (the imports and the client's construction come before the clock starts) and checks what it
read: the rows, and the sum of one metric.
"""
import argparse
import json
import os
import resource
import sys
import time

KEYS = ["m%d" % j for j in range(10)]


def rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def uri(tool, d):
    return "file://%s/mlruns" % d if tool == "mlflow-file" else "sqlite:///%s/mlflow.db" % d


def write(tool, d, steps, runs):
    t0 = time.perf_counter()
    out = {}
    if tool == "logd":
        import logd
        run = logd.init(project="peers-read", name="big")
        for s in range(steps):
            run.log({k: s * 0.001 + j for j, k in enumerate(KEYS)}, step=s)
        run.finish(timeout=600)
        out["big"] = run.id
        t1 = time.perf_counter()
        for i in range(runs):
            r = logd.init(project="peers-runs", name="r%d" % i, config={"c%d" % k: k * i for k in range(20)})
            r.log({"s%d" % k: k + i for k in range(10)})
            r.finish()
    elif tool.startswith("mlflow"):
        os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
        from mlflow.entities import Metric, Param
        from mlflow.tracking import MlflowClient
        c = MlflowClient(tracking_uri=uri(tool, d))
        exp = c.create_experiment("peers-read")
        run = c.create_run(exp, run_name="big")
        now = int(time.time() * 1000)
        batch = []
        for s in range(steps):
            for j, k in enumerate(KEYS):
                batch.append(Metric(k, s * 0.001 + j, now, s))
            if len(batch) >= 1000:
                c.log_batch(run.info.run_id, metrics=batch)
                batch = []
        if batch:
            c.log_batch(run.info.run_id, metrics=batch)
        c.set_terminated(run.info.run_id)
        out["big"] = run.info.run_id
        t1 = time.perf_counter()
        exp2 = c.create_experiment("peers-runs")
        for i in range(runs):
            r = c.create_run(exp2, run_name="r%d" % i)
            c.log_batch(r.info.run_id, params=[Param("c%d" % k, str(k * i)) for k in range(20)],
                        metrics=[Metric("s%d" % k, float(k + i), now, 0) for k in range(10)])
            c.set_terminated(r.info.run_id)
        out["exp"] = exp2
    elif tool == "tensorboard":
        from torch.utils.tensorboard import SummaryWriter
        w = SummaryWriter(os.path.join(d, "tb", "big"))
        for s in range(steps):
            for j, k in enumerate(KEYS):
                w.add_scalar(k, s * 0.001 + j, s)
        w.close()
        t1 = time.perf_counter()
    else:
        sys.exit("unknown tool %r" % tool)
    out.update(history_s=t1 - t0, runs_s=time.perf_counter() - t1)
    print(json.dumps(out))


def read_history(tool, d, ids):
    import numpy as np
    import pandas as pd
    if tool == "logd":
        import logd
        api = logd.Api()
        rss0 = rss_mb()
        t = time.perf_counter()
        df = api.run(ids["big"]).history()
    elif tool.startswith("mlflow"):
        os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
        from mlflow.tracking import MlflowClient
        c = MlflowClient(tracking_uri=uri(tool, d))
        rss0 = rss_mb()
        t = time.perf_counter()
        cols = {}
        for k in KEYS:
            h = c.get_metric_history(ids["big"], k)
            cols[k] = pd.Series([m.value for m in h], index=[m.step for m in h])
        df = pd.DataFrame(cols).sort_index()
    elif tool == "tensorboard":
        from tensorboard.backend.event_processing import event_accumulator as ea
        rss0 = rss_mb()
        t = time.perf_counter()
        acc = ea.EventAccumulator(os.path.join(d, "tb", "big"), size_guidance={ea.SCALARS: 0})  # 0: keep every point
        acc.Reload()
        cols = {}
        for k in KEYS:
            ev = acc.Scalars(k)
            cols[k] = pd.Series([e.value for e in ev], index=[e.step for e in ev])
        df = pd.DataFrame(cols).sort_index()
    took = time.perf_counter() - t
    print(json.dumps({"seconds": took, "rows": len(df), "m3_sum": float(np.nansum(df["m3"].to_numpy(dtype=float))),
                      "rss_growth_mb": rss_mb() - rss0}))


def read_runs(tool, d, ids):
    import pandas  # noqa: F401  (imported before the clock by every tool alike)
    if tool == "logd":
        import logd
        api = logd.Api()
        t = time.perf_counter()
        df = api.runs(project="peers-runs", limit=100_000).to_pandas()
        cols = [c for c in df.columns if c.startswith("config.")]
    elif tool.startswith("mlflow"):
        os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
        import mlflow
        mlflow.set_tracking_uri(uri(tool, d))
        t = time.perf_counter()
        df = mlflow.search_runs(experiment_ids=[ids["exp"]], max_results=100_000)
        cols = [c for c in df.columns if c.startswith("params.")]
    else:
        print(json.dumps({"none": "TensorBoard keeps no table of runs (one event directory a run)"}))
        return
    print(json.dumps({"seconds": time.perf_counter() - t, "rows": len(df), "config_columns": len(cols)}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what")
    ap.add_argument("tool")
    ap.add_argument("dir")
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--ids", default="{}")
    a = ap.parse_args()
    if a.what == "write":
        write(a.tool, a.dir, a.steps, a.runs)
    elif a.what == "read-history":
        read_history(a.tool, a.dir, json.loads(a.ids))
    elif a.what == "read-runs":
        read_runs(a.tool, a.dir, json.loads(a.ids))


main()
