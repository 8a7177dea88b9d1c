"""log() of one-element CUDA tensors must not wait for the GPU, and must store exactly their values.

A loop of heavy bf16 matmul steps logs {"loss": <CUDA tensor>, "lr": <float>} every step and a host-only row
{"host": s} every 7th step; the test keeps its own clone of each loss and reads it back only at the end. Then:
the stored rows (logd export --raw) hold every step once, each loss exactly the tensor's value, in log() order;
the median log() call is far below one step's GPU time; finish() ends `finished`. The same loop with
LOGD_DEVICE_VALUES=sync is timed beside it (the old behaviour: .item() in log()). Prints FIGURE lines; exits 1
on a failed check.

    python3 test/gpu/device_values.py
"""
import json
import os
import subprocess
import sys
import time

import torch

import logd

STEPS = 120


def loop(run, a, w):
    kept, times = [], []
    for s in range(STEPS):
        for _ in range(10):
            y = a @ w
        loss = y.float().pow(2).mean()
        kept.append(loss.detach().clone())
        t0 = time.perf_counter_ns()
        run.log({"loss": loss, "lr": 0.1}, step=s)
        if s % 7 == 0:
            run.log({"host": float(s)}, step=s)
        times.append(time.perf_counter_ns() - t0)
    t_loop_end = time.perf_counter()
    res = run.finish()
    return kept, sorted(times), res, t_loop_end


def main():
    if not torch.cuda.is_available():
        print("skipped: torch sees no CUDA device")
        return
    dev = torch.device("cuda", 0)
    a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    w = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(10):
        a @ w
    torch.cuda.synchronize()
    step_ms = (time.perf_counter() - t0) * 1000
    print("FIGURE gpu_step_ms %.2f" % step_ms, flush=True)

    problems = []
    figures = {}
    for mode in ("async", "sync"):
        os.environ["LOGD_DEVICE_VALUES"] = mode
        run = logd.init(project="gpu-check", name="device-values-%s" % mode)
        kept, times, res, _ = loop(run, a, w)
        med = times[len(times) // 2] / 1e6
        figures[mode] = med
        print("FIGURE log_cuda_scalar_%s_median_ms %.4f (p90 %.4f)" % (mode, med, times[int(len(times) * 0.9)] / 1e6), flush=True)
        if res.state != "finished":
            problems.append("%s: finish() ended %r (%s)" % (mode, res.state, res.message))
        out = subprocess.run(["logd", "export", run.id, "--raw", "--format", "jsonl"], capture_output=True, text=True, timeout=60)
        rows = [json.loads(l) for l in out.stdout.splitlines() if l.strip()]
        losses = [(r["_step"], r["loss"]) for r in rows if "loss" in r]
        hosts = [r["_step"] for r in rows if "host" in r]
        want = [(s, kept[s].item()) for s in range(STEPS)]
        if losses != want:
            bad = [(g, e) for g, e in zip(losses, want) if g != e][:3]
            problems.append("%s: stored losses differ from the tensors' values (%d stored, first differences %r)" % (mode, len(losses), bad))
        if hosts != list(range(0, STEPS, 7)):
            problems.append("%s: host-only rows stored at steps %r" % (mode, hosts[:20]))
        steps = [r["_step"] for r in rows]
        if steps != sorted(steps):
            problems.append("%s: rows were stored out of log() order" % mode)
        print("%s: %d rows stored, %d losses exactly as computed on the GPU" % (mode, len(rows), sum(1 for g, e in zip(losses, want) if g == e)))
    if figures["async"] > step_ms / 4:
        problems.append("async log() median %.3f ms is not far below a GPU step (%.1f ms): it still waits" % (figures["async"], step_ms))
    for p in problems:
        print("PROBLEM: %s" % p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
