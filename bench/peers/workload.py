"""One peer-benchmark workload in one fresh process, for one tool.

    python workload.py --tool wandb|mlflow|logd --work empty|steps|logcost|paced [--steps N --floats K --group G --name X]

Prints one JSON line on stdout: what it measured (milliseconds, microseconds)
and the run id. The tools run exactly as their users run them: wandb in
offline mode (wandb-core writes the run's .wandb file), MLflow with its local
file store, logd's Python client against the node's daemon. The caller gives
each process its own HOME and data dirs.
"""
import argparse
import json
import os
import sys
import time

T_START = time.perf_counter()


def metrics(step, k):
    return {f"m{j}": float(step * 0.001 + j) for j in range(k)}


class Wandb:
    def __init__(self):
        import wandb
        self.wandb = wandb

    def init(self, name, group):
        self.run = self.wandb.init(project="peers", name=name, group=group or None, mode="offline",
                                   dir=os.environ["PEERS_DIR"], settings=self.wandb.Settings(silent=True))
        return self.run.id

    def log(self, d, step):
        self.run.log(d, step=step)

    def finish(self):
        self.run.finish()


class Mlflow:
    def __init__(self):
        import mlflow
        self.mlflow = mlflow
        mlflow.set_tracking_uri("file://" + os.path.join(os.environ["PEERS_DIR"], "mlruns"))

    def init(self, name, group):
        self.run = self.mlflow.start_run(run_name=name, tags={"group": group} if group else None)
        return self.run.info.run_id

    def log(self, d, step):
        self.mlflow.log_metrics(d, step=step)

    def finish(self):
        self.mlflow.end_run()


class Logd:
    def __init__(self):
        import logd
        self.logd = logd

    def init(self, name, group):
        self.run = self.logd.init(project="peers", name=name, group=group or None)
        return self.run.id

    def log(self, d, step):
        self.run.log(d, step=step)

    def finish(self):
        self.run.finish()


TOOLS = {"wandb": Wandb, "mlflow": Mlflow, "logd": Logd}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True, choices=sorted(TOOLS))
    ap.add_argument("--work", required=True, choices=["empty", "steps", "logcost", "paced"])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--floats", type=int, default=10)
    ap.add_argument("--group", default="")
    ap.add_argument("--name", default="peers")
    a = ap.parse_args()
    out = {}
    t0 = time.perf_counter()
    tool = TOOLS[a.tool]()
    out["import_ms"] = (time.perf_counter() - t0) * 1e3
    t1 = time.perf_counter()
    out["run_id"] = tool.init(a.name, a.group)
    out["init_ms"] = (time.perf_counter() - t1) * 1e3
    # --steps 0 (paced until killed) still needs rows to cycle through.
    rows = [metrics(i, a.floats) for i in range(min(a.steps, 1000) if a.steps > 0 else 1000)]
    if a.work == "steps":
        for i in range(a.steps):
            tool.log(rows[i % len(rows)], i)
    elif a.work == "logcost":
        # CPU of the calling thread only: what the training loop pays.
        warm = min(1000, a.steps // 10)
        for i in range(warm):
            tool.log(rows[i % len(rows)], i)
        c0 = time.thread_time()
        w0 = time.perf_counter()
        for i in range(warm, warm + a.steps):
            tool.log(rows[i % len(rows)], i)
        out["cpu_us_per_log"] = (time.thread_time() - c0) / a.steps * 1e6
        out["wall_us_per_log"] = (time.perf_counter() - w0) / a.steps * 1e6
        out["rows"] = warm + a.steps
    elif a.work == "paced":
        # 100 rows every 10 ms, saying how far it got (for kill and SIGTERM
        # tests); --steps 0 logs until killed.
        i = 0
        while a.steps == 0 or i < a.steps:
            tool.log(rows[i % len(rows)], i)
            i += 1
            if i % 100 == 0:
                print(json.dumps({"logged": i}), flush=True)
                time.sleep(0.01)
    t2 = time.perf_counter()
    tool.finish()
    out["finish_ms"] = (time.perf_counter() - t2) * 1e3
    out["process_ms"] = (time.perf_counter() - T_START) * 1e3
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
