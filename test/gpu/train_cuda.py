"""A CUDA trainer for test/gpu/run.sh: bf16 matmuls on the GPU for DURATION seconds, logging through logd.

Each step logs the loss; every 10th step a Histogram of a CUDA gradient (binned on the GPU); at the end an
Image made from a CHW CUDA tensor. Before training it times logd.Histogram() of a 1 M-element CUDA tensor and
of the same tensor on the CPU (medians of 50). Prints `RUN <id>` and `FIGURE name value` lines.

    python3 test/gpu/train_cuda.py [DURATION_S]
"""
import os
import sys
import time

import torch

import logd

DURATION = float(sys.argv[1]) if len(sys.argv) > 1 else 12.0


def median_ms(fn, n=50):
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return times[len(times) // 2]


def main():
    if torch.cuda.is_available():
        dev, n, name = torch.device("cuda", 0), 8192, torch.cuda.get_device_name(0)
    elif os.environ.get("LOGD_GPU_CHECK_ALLOW_CPU"):  # a dry run of run.sh on a machine without a GPU
        dev, n, name = torch.device("cpu"), 256, "cpu"
    else:
        sys.exit("train_cuda.py: torch sees no CUDA device (torch %s)" % torch.__version__)
    run = logd.init(project="gpu-check", name="cuda-train", config={"device": name, "torch": torch.__version__})
    print("RUN %s" % run.id, flush=True)

    g_gpu = torch.randn(1_000_000, device=dev)
    g_cpu = g_gpu.cpu()
    logd.Histogram(g_gpu)  # warm-up: the first histc compiles/loads its kernel
    print("FIGURE histogram_1M_%s_ms %.3f" % (dev.type, median_ms(lambda: logd.Histogram(g_gpu))), flush=True)
    print("FIGURE histogram_1M_cpu_ms %.3f" % median_ms(lambda: logd.Histogram(g_cpu)), flush=True)
    print("FIGURE torch_threads %d" % torch.get_num_threads(), flush=True)
    # log() of a 0-d device tensor converts it on the calling thread (.item(): a device-to-host copy that waits
    # for the kernels queued before it). Here the queue is empty, so this is the copy's own cost against a float.
    one = torch.ones((), device=dev)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    side = logd.init(project="gpu-check", name="log-overhead")
    for label, value in (("float", 1.0), ("tensor0d_%s" % dev.type, one)):
        print("FIGURE log_%s_median_us %.2f" % (label, 1000 * median_ms(lambda: side.log({"x": value}), 500)), flush=True)
    side.finish()

    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    w = torch.randn(n, n, device=dev, dtype=torch.bfloat16, requires_grad=True)
    step = 0
    t_end = time.time() + DURATION
    log_ns = []
    while time.time() < t_end:
        for _ in range(20):
            y = a @ w
        loss = (y.float().pow(2).mean())
        loss.backward()
        row = {"loss": loss.detach(), "step_time": 0.0}
        if step % 10 == 0:
            row["grad/w"] = logd.Histogram(w.grad.flatten()[:1_000_000])
        t0 = time.perf_counter_ns()
        run.log(row, step=step)
        log_ns.append(time.perf_counter_ns() - t0)
        w.grad = None
        step += 1
    if dev.type == "cuda":
        torch.cuda.synchronize()
    img = torch.rand(3, 64, 64, device=dev)
    run.log({"sample": logd.Image(img, caption="random CHW cuda tensor")}, step=step)
    run.summary.update({"steps": step})
    log_ns.sort()
    print("FIGURE log_in_training_loop_median_us %.2f" % (log_ns[len(log_ns) // 2] / 1000), flush=True)
    print("FIGURE steps %d" % step, flush=True)
    res = run.finish()
    print("FINISHED %s %r" % (run.id, res), flush=True)


if __name__ == "__main__":
    main()
