"""Reads `logd export RUN --system --format jsonl` (a file) and says what the sampler saw of the GPU.

Exits non-zero when the GPU was never seen busy during the CUDA trainer's run, or its memory was never
attributed to the run's own process (the `gpu.process.*` keys). Prints the maxima it found.

    python3 test/gpu/check_system.py EXPORT.jsonl
"""
import json
import sys


def main():
    rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
    keys = sorted({k for r in rows for k in r})
    print("system rows: %d; gpu keys: %s" % (len(rows), ", ".join(k for k in keys if k.startswith("gpu"))))

    def maximum(key):
        vals = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
        return max(vals) if vals else None

    found = {k: maximum(k) for k in ("gpu.0.gpu", "gpu.0.memoryAllocatedBytes", "gpu.0.powerWatts", "gpu.0.temp",
                                     "gpu.process.memoryAllocatedBytes", "gpu.process.gpus")}
    for k in keys:
        if k.startswith("gpu.0.") and k not in found:
            found[k] = maximum(k)
    for k, v in found.items():
        print("max %s = %s" % (k, v))
    problems = []
    if not rows:
        problems.append("no system rows")
    util = [v for k, v in found.items() if k.startswith("gpu.0.") and ("gpu" == k.split(".")[-1]) and v is not None]
    if not util or max(util) <= 0:
        problems.append("GPU utilisation never above 0 while the trainer ran")
    if not found.get("gpu.process.memoryAllocatedBytes"):
        problems.append("the trainer's GPU memory was never attributed to its run (gpu.process.memoryAllocatedBytes)")
    for p in problems:
        print("PROBLEM: %s" % p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
