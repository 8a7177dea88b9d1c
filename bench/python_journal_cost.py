"""What the crash journal (python/logd/spool/journal.py, docs/journal.md) costs log(): the training thread's CPU per
log() of 10 metrics, with the journal, without it (LOGD_JOURNAL_MB=0), and with another client for comparison
(--baseline: a git revision, whose python/ is taken with `git archive`, or a python/ directory; default HEAD, the
client before the journal while the journal is not committed), measured in one sitting against one daemon.

Each measurement is a fresh interpreter that logs N rows (after 1000 to warm up) and reads time.thread_time, so
the writer thread that encodes and sends is not counted. Variants take turns, ROUNDS times; the median is printed,
with the range (the minimum is the least disturbed by other load on the machine).

    make python && .venv-python/bin/python bench/python_journal_cost.py [N] [ROUNDS] [--baseline REV|DIR]
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI = os.path.join(ROOT, "dist", "daemon", "cli.js")

CHILD = r"""
import json, os, resource, sys, time
import logd
n = int(sys.argv[1])
run = logd.init(project="bench", name="journal-cost")
row = {"loss": 0.5, "acc": 0.9, "lr": 1e-3, "grad_norm": 1.5, "tokens": 4096,
       "m5": 0.1, "m6": 0.2, "m7": 0.3, "m8": 0.4, "m9": 0.5}
for i in range(1000):
    run.log(row)
r0 = resource.getrusage(resource.RUSAGE_THREAD)  # system time and page faults of this thread
c0, w0 = time.thread_time(), time.perf_counter()
for i in range(n):
    row["loss"] = 1.0 / (i + 1)
    run.log(row)
c1, w1 = time.thread_time(), time.perf_counter()
r1 = resource.getrusage(resource.RUSAGE_THREAD)
w = run._writer
journal = getattr(w, "journal", None)
res = run.finish(timeout=60)
print(json.dumps({"cpu_us": (c1 - c0) / n * 1e6, "wall_us": (w1 - w0) / n * 1e6, "state": res.state,
                  "journal": journal is not None, "not_journaled": journal.not_journaled if journal else 0,
                  "id": run.id, "file": logd.__file__, "sys_us": (r1.ru_stime - r0.ru_stime) / n * 1e6, "minflt": r1.ru_minflt - r0.ru_minflt}))
"""


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if "--baseline" in sys.argv:
        args.remove(sys.argv[sys.argv.index("--baseline") + 1])
    n = int(args[0]) if args else 100_000
    rounds = int(args[1]) if len(args) > 1 else 5
    tmp = tempfile.mkdtemp(prefix="logd-journal-bench-")
    base = sys.argv[sys.argv.index("--baseline") + 1] if "--baseline" in sys.argv else "HEAD"
    baseline = os.path.abspath(base) if os.path.isdir(base) else None
    if baseline is None:
        try:  # the client of that revision
            tar = subprocess.run(["git", "-C", ROOT, "archive", base, "python"], capture_output=True, check=True).stdout
            subprocess.run(["tar", "-x", "-C", tmp], input=tar, check=True)
            baseline = os.path.join(tmp, "python")
        except (OSError, subprocess.CalledProcessError) as e:
            print("no baseline (git archive %s python failed: %s); pass --baseline REV|DIR" % (base, e))
    env = dict(os.environ, LOGD_DIR=os.path.join(tmp, "data"), LOGD_RUNTIME_DIR=os.path.join(tmp, "rt"),
               LOGD_IDLE_TIMEOUT_MS="30000")
    env.pop("LOGD_SERVICE", None)
    env.setdefault("LOGD_BIN", "node %s" % CLI)
    here = os.path.join(ROOT, "python")
    variants = [("journal (LOGD_JOURNAL_MB=64)", here, "64"), ("no journal (LOGD_JOURNAL_MB=0)", here, "0")]
    if baseline:
        variants.append(("baseline (%s)" % base, baseline, "0"))
    results = {name: [] for name, _, _ in variants}
    try:
        for r in range(rounds):
            for name, path, mb in variants:
                e = dict(env, PYTHONPATH=path, LOGD_JOURNAL_MB=mb)
                out = subprocess.run([sys.executable, "-c", CHILD, str(n)], env=e, capture_output=True, text=True, timeout=600)
                if out.returncode != 0:
                    sys.exit("%s failed:\n%s" % (name, out.stderr))
                res = json.loads(out.stdout.strip().splitlines()[-1])
                assert res["file"].startswith(path), res["file"]
                results[name].append(res)
        print("python %s, %d log() calls of 10 metrics, %d rounds, median (min-max) of the training thread's CPU"
              % (sys.version.split()[0], n, rounds))
        for name, _, _ in variants:
            cpu = [x["cpu_us"] for x in results[name]]
            wall = [x["wall_us"] for x in results[name]]
            extra = ""
            if any(x["journal"] for x in results[name]):
                extra = ", not journaled: %d" % max(x["not_journaled"] for x in results[name])
            sys_us = statistics.median(x["sys_us"] for x in results[name])
            faults = statistics.median(x["minflt"] for x in results[name])
            print("  %-36s %.2f us (%.2f-%.2f), of which system %.2f us (%d page faults); wall %.2f us%s; %s" % (
                name, statistics.median(cpu), min(cpu), max(cpu), sys_us, faults, statistics.median(wall), extra,
                ",".join(sorted(set(x["state"] for x in results[name])))))
        left = [f for f in os.listdir(os.path.join(tmp, "data", "spool")) if f.endswith(".journal")]
        print("  journals left in the spool after finish(): %d" % len(left))
    finally:
        subprocess.run(["node", CLI, "stop"], env=env, capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
