"""logd's Python client next to wandb (offline mode) and MLflow, in one run (issue 12's figures).

    bash bench/python-peers-venv.sh            # .venv-bench-python: wandb, mlflow-skinny, ./python from PyPI
    .venv-bench-python/bin/python bench/python_peers.py [--calls N]

Prints, per library:
  1. the calling thread's CPU per log() of 10 metrics (time.thread_time; N calls,
     fewer for the slow peers, as said in the output);
  2. the wall time of a whole process that imports the library, creates a run and
     finishes it (median of 3 fresh processes; logd's daemon already running);
  3. 8 processes x 10 000 steps x 10 metrics in one group, logd vs wandb: wall
     time from the first start to the last exit, and the rows each stored.
Each measurement runs in a fresh subprocess with its own temporary directory.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROW = "{'loss': 0.5, 'acc': 0.9, 'lr': 1e-3, 'grad_norm': 1.5, 'tokens': 4096, 'm5': 0.1, 'm6': 0.2, 'm7': 0.3, 'm8': 0.4, 'm9': 0.5}"

LOG_COST = {
    "logd": """
import logd
run = logd.init(project="bench", name="peers")
def log(d, i): run.log(d)
def end(): run.finish(timeout=120)
""",
    "wandb": """
import wandb
run = wandb.init(project="bench", mode="offline", dir=TMP)
def log(d, i): run.log(d)
def end(): run.finish()
""",
    "mlflow": """
import mlflow
mlflow.set_tracking_uri("file://" + TMP + "/mlruns")
mlflow.start_run()
def log(d, i): mlflow.log_metrics(d, step=i)
def end(): mlflow.end_run()
""",
}

MEASURE = """
import json, os, sys, time
TMP = os.environ["BENCH_TMP"]
N = int(sys.argv[1])
{setup}
row = {row}
for i in range(min(200, N)):
    log(row, i)
c0 = time.thread_time()
for i in range(N):
    row["loss"] = 1.0 / (i + 1)
    log(row, i)
c1 = time.thread_time()
end()
print(json.dumps({{"us": (c1 - c0) / N * 1e6}}))
"""

WHOLE = {
    "logd": "import logd; run = logd.init(project='bench'); run.finish()",
    "wandb": "import os, wandb; run = wandb.init(project='bench', mode='offline', dir=os.environ['BENCH_TMP']); run.finish()",
    "mlflow": "import os, mlflow; mlflow.set_tracking_uri('file://' + os.environ['BENCH_TMP'] + '/mlruns'); mlflow.start_run(); mlflow.end_run()",
}


def env_for(tmp: str) -> dict:
    # MLflow 3 refuses its file store unless asked; a file store is what needs no server here.
    env = dict(os.environ, BENCH_TMP=tmp, WANDB_SILENT="true", WANDB_DISABLE_GIT="true", WANDB_MODE="offline", MLFLOW_ALLOW_FILE_STORE="true")
    return env


def run_py(code: str, args, env, timeout=600):
    r = subprocess.run([sys.executable, "-c", code] + [str(a) for a in args], env=env, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError("%s\n%s" % (r.stdout[-2000:], r.stderr[-2000:]))
    return r.stdout


GROUP_WORKER = {
    "logd": """
import logd, os, sys
run = logd.init(project="bench", group=os.environ["BENCH_GROUP"], name="w" + sys.argv[2])
for i in range(int(sys.argv[1])):
    run.log({'loss': 1.0 / (i + 1), 'acc': 0.9, 'lr': 1e-3, 'g': 1.5, 't': i, 'm5': 0.1, 'm6': 0.2, 'm7': 0.3, 'm8': 0.4, 'm9': 0.5})
run.finish(timeout=300)
""",
    "wandb": """
import wandb, os, sys
run = wandb.init(project="bench", group=os.environ["BENCH_GROUP"], name="w" + sys.argv[2], mode="offline", dir=os.environ["BENCH_TMP"])
for i in range(int(sys.argv[1])):
    run.log({'loss': 1.0 / (i + 1), 'acc': 0.9, 'lr': 1e-3, 'g': 1.5, 't': i, 'm5': 0.1, 'm6': 0.2, 'm7': 0.3, 'm8': 0.4, 'm9': 0.5})
run.finish()
""",
}


def count_logd(group: str) -> int:
    r = subprocess.run(["node", os.path.join(ROOT, "dist", "daemon", "cli.js"), "runs", "--group", group, "--json"],
                       env=os.environ, capture_output=True, text=True, check=True)
    return sum(run["historyRows"] for run in json.loads(r.stdout))


def wandb_records(path: str):
    """The records of a .wandb file: a 7-byte header, then LevelDB-log blocks of 32 KiB
    whose records have a 7-byte header (crc32c, u16 LE length, type: 1 full, 2 first,
    3 middle, 4 last)."""
    import struct

    with open(path, "rb") as f:
        data = f.read()
    pos, block, parts = 7, 32768, []
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:
            pos += left
            continue
        length, kind = struct.unpack_from("<HB", data, pos + 4)
        if kind == 0 and length == 0:
            pos += left  # zero padding to the end of the block
            continue
        chunk = data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind == 1:
            yield chunk
        elif kind == 2:
            parts = [chunk]
        elif kind == 3:
            parts.append(chunk)
        elif kind == 4:
            parts.append(chunk)
            yield b"".join(parts)


def count_wandb(tmp: str) -> object:
    """History records in the offline runs' .wandb files."""
    try:
        from wandb.proto import wandb_internal_pb2
    except Exception as e:
        return "not counted (%s)" % e
    n = 0
    for dirpath, _, files in os.walk(tmp):
        for f in files:
            if f.endswith(".wandb"):
                for data in wandb_records(os.path.join(dirpath, f)):
                    rec = wandb_internal_pb2.Record()
                    rec.ParseFromString(data)
                    if rec.WhichOneof("record_type") == "history":
                        n += 1
    return n


def many(base: str, procs: int, steps: int) -> None:
    print("%d processes x %d steps x 10 metrics in one group: wall time, rows stored" % (procs, steps))
    for lib, code in GROUP_WORKER.items():
        tmp = tempfile.mkdtemp(dir=base)
        env = dict(env_for(tmp), BENCH_GROUP="many-" + lib)
        try:
            t0 = time.perf_counter()
            ps = [subprocess.Popen([sys.executable, "-c", code, str(steps), str(i)], env=env, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, text=True) for i in range(procs)]
            errs = [p.communicate(timeout=900)[1] for p in ps]
            wall = time.perf_counter() - t0
            if any(p.returncode for p in ps):
                raise RuntimeError(next(e for p, e in zip(ps, errs) if p.returncode).strip().splitlines()[-1])
            stored = count_logd("many-logd") if lib == "logd" else count_wandb(tmp)
            print("  %-7s %7.1f s   rows stored: %s of %d" % (lib, wall, stored, procs * steps))
        except Exception as e:
            print("  %-7s not measured: %s" % (lib, e))


def main() -> None:
    calls = 100_000
    if "--calls" in sys.argv:
        calls = int(sys.argv[sys.argv.index("--calls") + 1])
    base = tempfile.mkdtemp(prefix="logd-peers-")
    os.environ.update(LOGD_DIR=os.path.join(base, "logd-data"), LOGD_RUNTIME_DIR=os.path.join(base, "rt"), LOGD_IDLE_TIMEOUT_MS="60000")
    os.environ.pop("LOGD_SERVICE", None)
    os.environ.setdefault("LOGD_BIN", "node %s" % os.path.join(ROOT, "dist", "daemon", "cli.js"))
    # Slow peers get fewer calls so the whole bench stays around a minute; the figure is per call.
    budget = {"logd": calls, "wandb": min(calls, 20_000), "mlflow": min(calls, 2_000)}
    try:
        print("python %s; per-log() CPU of the calling thread, 10 metrics per call" % sys.version.split()[0])
        results = {}
        for lib, setup in LOG_COST.items():
            tmp = tempfile.mkdtemp(dir=base)
            try:
                out = run_py(MEASURE.format(setup=setup, row=ROW), [budget[lib]], env_for(tmp))
                results[lib] = json.loads(out.strip().splitlines()[-1])["us"]
                print("  %-7s %9.2f us/call  (%d calls)" % (lib, results[lib], budget[lib]))
            except Exception as e:  # a peer that is not installed is reported, not fatal
                print("  %-7s not measured: %s" % (lib, str(e).strip().splitlines()[-1] if str(e).strip() else e))
        if "logd" in results:
            for peer in ("wandb", "mlflow"):
                if peer in results:
                    print("  %s / logd: %.0fx" % (peer, results[peer] / results["logd"]))
        print("whole process: import, init, finish (median of 3 fresh processes; logd's daemon already running)")
        for lib, code in WHOLE.items():
            times = []
            try:
                for _ in range(3):
                    tmp = tempfile.mkdtemp(dir=base)
                    t0 = time.perf_counter()
                    run_py(code, [], env_for(tmp), timeout=300)
                    times.append((time.perf_counter() - t0) * 1000)
                print("  %-7s %7.0f ms   (%s)" % (lib, statistics.median(times), ", ".join("%.0f" % t for t in times)))
            except Exception as e:
                print("  %-7s not measured: %s" % (lib, str(e).strip().splitlines()[-1] if str(e).strip() else e))
        many(base, procs=8, steps=10_000)
    finally:
        subprocess.run(["node", os.path.join(ROOT, "dist", "daemon", "cli.js"), "stop"], env=os.environ, capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
