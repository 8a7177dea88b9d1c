"""Issue 20's figures for the Python client: histograms and console capture. Prints figures, asserts nothing.

  (a) logd.Histogram(...) on the calling thread: a 1 M-element float32 CPU torch tensor (target <= 5 ms per call),
      a 1 M NumPy float64 array and a 10 M tensor for scale; medians of N calls, the variants taken in turn each
      round. Beside them, the building blocks of a CPU histogram in this torch (finite counts, aminmax, histc,
      bincount of int64 or int32 bin indices) and a one-pass path that is not the client's code (aminmax,
      then bincount of int32 indices), to show where the time goes whatever the client's code is that day.
  (b) scalar run.log() of 10 metrics in a run that never logs media against one that logs a Histogram
      (64 bins, made once) in every 100th row: calling-thread CPU per scalar row, per histogram row, and the
      process CPU per row (the writer thread's encoding and sending included, up to flush()). Two runs open in
      this one process, their rounds alternated (and their order swapped each round).
  (c) console capture: print() of ~70-character lines paced at 10 000 lines/s for a few seconds, capture on
      (the default, each write also journaled), capture on without the crash journal (LOGD_JOURNAL_MB=0, to
      show the journaling's share) and init(console=False), their order rotated each round. The lines go to
      /dev/null (a block-buffered file, as when a job's output is redirected). Then the two pieces of one
      journaled write, timed apart.

Against a real daemon in a fresh data dir, auto-started through LOGD_BIN (default: this repository's
`node dist/daemon/cli.js`). CPU is time.thread_time (the calling thread) unless it says process.

    .venv-python/bin/python bench/media.py [--quick]
"""
import os
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUICK = "--quick" in sys.argv
OUT = sys.stdout  # the bench's own output; section (c) points sys.stdout elsewhere while it prints
ROW = {"loss": 0.5, "acc": 0.9, "lr": 1e-3, "grad_norm": 1.5, "tokens": 4096,
       "m5": 0.1, "m6": 0.2, "m7": 0.3, "m8": 0.4, "m9": 0.5}


def say(s: str = "") -> None:
    OUT.write(s + "\n")
    OUT.flush()


def median(xs):
    s = sorted(xs)
    return s[len(s) // 2]


def load() -> str:
    return "%.2f %.2f %.2f" % os.getloadavg()


def daemon_cpu() -> float:
    """The daemon's CPU seconds so far (utime + stime from /proc), or NaN when it cannot be read."""
    try:
        import json

        with open(os.path.join(os.environ["LOGD_RUNTIME_DIR"], "service.json")) as f:
            pid = json.load(f)["pid"]
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except Exception:
        return float("nan")


def timed(f):
    """(calling-thread CPU, wall, process CPU) of one call, in seconds."""
    c0, w0, p0 = time.thread_time(), time.perf_counter(), time.process_time()
    f()
    return time.thread_time() - c0, time.perf_counter() - w0, time.process_time() - p0


# ---- (a) Histogram ----

def media_version(logd) -> str:
    """Which media.py is measured: its hash, and whether it is the committed one (the client changes under work)."""
    import hashlib
    import subprocess

    path = os.path.join(os.path.dirname(logd.__file__), "media.py")
    with open(path, "rb") as f:
        mine = f.read()
    try:
        head = subprocess.run(["git", "-C", ROOT, "show", "HEAD:python/logd/media/"], capture_output=True, check=True).stdout
        same = "= HEAD's" if head == mine else "differs from HEAD's (uncommitted change)"
    except Exception:
        same = "HEAD's unknown"
    return "media.py sha256 %s, %s" % (hashlib.sha256(mine).hexdigest()[:12], same)


def histogram_cost(logd, results) -> None:
    import numpy as np
    import torch

    say("(a) logd.Histogram on the calling thread (load %s; torch %s, %d intra-op thread(s); %s)"
        % (load(), torch.__version__, torch.get_num_threads(), media_version(logd)))
    torch.manual_seed(0)
    t1 = torch.randn(1_000_000, dtype=torch.float32)
    a1 = np.random.default_rng(0).standard_normal(1_000_000)
    t10 = torch.randn(10_000_000, dtype=torch.float32)
    bins = 64

    def indices(t, lo, hi, dtype):
        return ((t - lo) * (bins / (hi - lo))).to(dtype).clamp_(0, bins - 1)

    def candidate(t):
        lo, hi = torch.aminmax(t)
        lo, hi = float(lo), float(hi)  # finite min and max: no NaN or infinity anywhere (NaN would propagate)
        return torch.bincount(indices(t, lo, hi, torch.int32), minlength=bins)

    lo, hi = float(t1.min()), float(t1.max())
    # The client's calls first; then the building blocks a CPU histogram is made of in this torch, each on the
    # same 1 M float32 tensor, whatever the client's code does at the time of the run.
    variants = {
        "Histogram(1 M float32 tensor)": lambda: logd.Histogram(t1, bins=bins),
        "Histogram(1 M float64 NumPy array)": lambda: logd.Histogram(a1, bins=bins),
        "  block: finite count, int(torch.isfinite(t).sum())": lambda: int(torch.isfinite(t1).sum()),
        "  block: finite count, int(((t - t) == 0).count_nonzero())": lambda: int(((t1 - t1) == 0).count_nonzero()),
        "  block: min and max, torch.aminmax(t)": lambda: [float(x) for x in torch.aminmax(t1)],
        "  block: torch.histc(t, 64, lo, hi)": lambda: torch.histc(t1, bins=bins, min=lo, max=hi),
        "  block: int64 bin indices + torch.bincount": lambda: torch.bincount(indices(t1, lo, hi, torch.int64), minlength=bins),
        "  block: int32 bin indices + torch.bincount": lambda: torch.bincount(indices(t1, lo, hi, torch.int32), minlength=bins),
        "  one pass, not the client's code: aminmax + int32 bincount": lambda: candidate(t1),
    }
    big = "Histogram(10 M float32 tensor)"
    rounds = 10 if QUICK else 30
    for f in variants.values():  # warm-up
        f()
        f()
    logd.Histogram(t10, bins=bins)
    got = {k: [] for k in list(variants) + [big]}
    for r in range(rounds):
        for k, f in variants.items():
            got[k].append(timed(f))
        if r % 3 == 0:
            got[big].append(timed(lambda: logd.Histogram(t10, bins=bins)))
    ref = torch.histc(t1, bins=bins, min=lo, max=hi)
    moved = int((candidate(t1).to(ref.dtype) - ref).abs().sum().item()) // 2
    say("  %-72s %9s %9s %9s  (n)" % ("", "thread", "wall", "process"))
    for k, xs in got.items():
        c, w, p = (median([x[i] for x in xs]) * 1e3 for i in range(3))
        say("  %-72s %6.2f ms %6.2f ms %6.2f ms  (%d)" % (k, c, w, p, len(xs)))
        results["a"][k] = (c, w, p, len(xs))
    say("  the one-pass counts against torch.histc's: %d of 1 M values in a neighbouring bin" % moved)
    results["a_moved"] = moved
    say("  load after: %s" % load())


# ---- (b) scalar log() with and without histograms in the run ----

def scalar_cost(logd, results) -> None:
    import torch

    runs = {
        "scalars only": logd.init(project="bench", name="media-scalars-only", console=False),
        "a Histogram every 100 rows": logd.init(project="bench", name="media-hist-every-100", console=False),
    }
    h = logd.Histogram(torch.randn(10_000), bins=64)
    rows_per_round = 20_000 if QUICK else 50_000
    rounds = 4 if QUICK else 10
    say("(b) run.log() of 10 metrics, %d rounds x %d rows per run, alternated (load %s)" % (rounds, rows_per_round, load()))
    for name, run in runs.items():  # warm-up: names checked, caches warm, the writer connected
        with_hist = name != "scalars only"
        for i in range(2000):
            run.log(dict(ROW, **{"grad/w1": h}) if with_hist and i % 100 == 0 else ROW)
        run.flush(timeout=30)
    per = {name: {"scalar": [], "first": [], "process": [], "wall": []} for name in runs}
    row = dict(ROW)
    hist_row = dict(ROW, **{"grad/w1": h})
    tt, pt, pc = time.thread_time, time.process_time, time.perf_counter
    for r in range(rounds):
        order = list(runs) if r % 2 == 0 else list(runs)[::-1]
        for name in order:
            run = runs[name]
            first = hist_row if name != "scalars only" else row
            scalar = 0.0
            head = 0.0
            p0, w0 = pt(), pc()
            for seg in range(rows_per_round // 100):
                c0 = tt()
                first["loss"] = 1.0 / (seg + 1)
                run.log(first)  # row 0 of each 100: the histogram row (a plain row in the scalars-only run)
                c1 = tt()
                for i in range(99):
                    row["loss"] = 1.0 / (i + 2)
                    run.log(row)
                c2 = tt()
                head += c1 - c0
                scalar += c2 - c1
            wall = pc() - w0
            run.flush(timeout=60)
            proc = pt() - p0
            n = rows_per_round // 100
            per[name]["scalar"].append(scalar / (99 * n) * 1e6)
            per[name]["first"].append(head / n * 1e6)
            per[name]["process"].append(proc / rows_per_round * 1e6)
            per[name]["wall"].append(wall / rows_per_round * 1e6)
    a, b = list(runs)
    ratio = [y / x for x, y in zip(per[a]["scalar"], per[b]["scalar"])]
    say("  %-28s %18s %18s %22s %20s" % ("run", "scalar row, thread", "row 0 of 100", "all rows, process CPU", "all rows, wall"))
    for name in runs:
        m = {k: median(v) for k, v in per[name].items()}
        say("  %-28s %15.2f us %15.2f us %19.2f us %17.2f us" % (name, m["scalar"], m["first"], m["process"], m["wall"]))
        say("  %-28s %s" % ("", "scalar per round: " + ", ".join("%.2f" % x for x in per[name]["scalar"])))
        results["b"][name] = m
    say("  scalar row, histogram run / scalars-only run, per round: median %.3f (min %.3f, max %.3f)" % (median(ratio), min(ratio), max(ratio)))
    results["b_ratio"] = (median(ratio), min(ratio), max(ratio))
    for run in runs.values():
        run.finish(timeout=60)
    say("  load after: %s" % load())


# ---- (c) console capture ----

CONSOLE_VARIANTS = (
    ("capture on (the default)", True, None),
    ("capture on, no crash journal", True, "0"),  # LOGD_JOURNAL_MB=0: the journaling's share of the cost
    ("console=False", False, None),
)


def console_cost(logd, results) -> None:
    rate = 10_000
    seconds = 1.5 if QUICK else 3.0
    rounds = 2 if QUICK else 4  # per variant
    lines = ["step %7d | loss %.5f | lr %.3e | tokens/s %8d | grad norm %.4f" % (i, 1 / (i + 1), 3e-4, 41000 + i, 1.5)
             for i in range(1000)]
    say("(c) print() paced at %d lines/s for %.1f s per round, %d rounds per variant, their order rotated each round (load %s)"
        % (rate, seconds, rounds, load()))
    per = {v[0]: {"thread": [], "process": [], "others": [], "daemon": [], "rate": []} for v in CONSOLE_VARIANTS}
    devnull = open(os.devnull, "w")
    real = sys.stdout
    journaled = {}
    journal_env = os.environ.get("LOGD_JOURNAL_MB")
    tt = time.thread_time
    try:
        for r in range(rounds):
            for name, on, journal_mb in CONSOLE_VARIANTS[r % 3:] + CONSOLE_VARIANTS[:r % 3]:
                if journal_mb is None:
                    os.environ.pop("LOGD_JOURNAL_MB", None)
                else:
                    os.environ["LOGD_JOURNAL_MB"] = journal_mb
                sys.stdout = devnull
                run = logd.init(project="bench", name="media-console-%d" % r, console=on)
                c = getattr(run, "_console", None)
                journaled[name] = c is not None and c.journal_to is not None and getattr(c.journal_to, "journal", None) is not None
                for i in range(2000):  # warm-up
                    print(lines[i % 1000])
                run.flush(timeout=30)
                cpu = 0.0
                n = 0
                per_tick = rate // 1000
                d0, p0, m0, w0 = daemon_cpu(), time.process_time(), tt(), time.perf_counter()
                deadline = w0
                end = w0 + seconds
                while True:
                    now = time.perf_counter()
                    if now >= end:
                        break
                    if deadline > now:
                        time.sleep(deadline - now)
                    deadline += 0.001
                    c0 = tt()
                    for j in range(per_tick):
                        print(lines[(n + j) % 1000])
                    cpu += tt() - c0
                    n += per_tick
                wall = time.perf_counter() - w0
                run.flush(timeout=30)
                main_thread = tt() - m0  # the prints, the pacing and the flush's wait
                proc = time.process_time() - p0
                daemon = daemon_cpu() - d0
                run.finish(timeout=30)
                sys.stdout = real
                per[name]["thread"].append(cpu / n * 1e6)
                per[name]["process"].append(proc / n * 1e6)
                per[name]["others"].append((proc - main_thread) / n * 1e6)
                per[name]["daemon"].append(daemon / n * 1e6)
                per[name]["rate"].append(n / wall)
    finally:
        sys.stdout = real
        devnull.close()
        if journal_env is None:
            os.environ.pop("LOGD_JOURNAL_MB", None)
        else:
            os.environ["LOGD_JOURNAL_MB"] = journal_env
    say("  %-30s %9s %20s %30s %30s %22s %10s" % ("variant", "journaled", "print(), thread CPU", "process CPU per line (+flush)",
                                                  "other threads (writer, gRPC)", "daemon CPU per line", "lines/s"))
    for name, v in per.items():
        m = {k: median(x) for k, x in v.items()}
        say("  %-30s %9s %17.2f us %27.2f us %27.2f us %19.2f us %10.0f" % (name, journaled.get(name), m["thread"], m["process"],
                                                                          m["others"], m["daemon"], m["rate"]))
        say("  %-30s %s" % ("", "thread per round: " + ", ".join("%.2f" % x for x in v["thread"])))
        results["c"][name] = m
    off = results["c"]["console=False"]
    for name, _, _ in CONSOLE_VARIANTS[:2]:
        on = results["c"][name]
        say("  overhead, %s: %.2f us per line on the calling thread, %.2f us process CPU; at %d lines/s %.1f %% / %.1f %% of a core"
            % (name, on["thread"] - off["thread"], on["process"] - off["process"], rate,
               (on["thread"] - off["thread"]) * rate / 1e4, (on["process"] - off["process"]) * rate / 1e4))
    journal_pieces(logd, lines[0], results)
    say("  load after: %s" % load())


def journal_pieces(logd, line, results) -> None:
    """Where a journaled write's time goes, one piece at a time (print() makes two writes: the text and "\\n").
    Reaches into the client's internals (console._entry, the writer's journal and lock): n/a when they moved."""
    try:
        from logd.console import _entry

        run = logd.init(project="bench", name="media-journal-pieces", console=False)
        w = run._writer
        n = 20_000
        e = _entry(time.time(), "out", line)

        def each(f):
            f()
            c0 = time.thread_time()
            for _ in range(n):
                f()
            return (time.thread_time() - c0) / n * 1e6

        def update():
            with w._buf_lock:
                w.journal.update("console", e)

        entry_us = each(lambda: _entry(time.time(), "out", line))
        update_us = each(update)
        run.finish(timeout=30)
        say("  one journaled write: its JSON entry (console._entry) %.2f us, journal.update under the writer's lock %.2f us"
            % (entry_us, update_us))
        results["c_pieces"] = (entry_us, update_us)
    except Exception as ex:  # a bench of internals: say so, go on
        say("  one journaled write: n/a (%s)" % ex)


def main() -> None:
    tmp = tempfile.mkdtemp(prefix="logd-mediabench-")
    os.environ.update(LOGD_DIR=os.path.join(tmp, "data"), LOGD_RUNTIME_DIR=os.path.join(tmp, "rt"), LOGD_IDLE_TIMEOUT_MS="2000")
    os.environ.pop("LOGD_SERVICE", None)
    os.environ.pop("LOGD_CONSOLE", None)
    os.environ.setdefault("LOGD_BIN", "node %s" % os.path.join(ROOT, "dist", "daemon", "cli.js"))
    import logd

    say("python %s, logd from %s; %s UTC; load %s" % (sys.version.split()[0], os.path.dirname(logd.__file__),
                                                        time.strftime("%Y-%m-%d %H:%M", time.gmtime()), load()))
    results = {"a": {}, "b": {}, "c": {}}
    try:
        histogram_cost(logd, results)
        scalar_cost(logd, results)
        console_cost(logd, results)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
