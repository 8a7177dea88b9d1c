"""Counts what a tool stored, read back from its own files after the run:
wandb's .wandb files (history records), MLflow's file store (metric points
of one key), so the benchmark can verify every run kept every row.

    python count.py wandb DIR        -> {"runs": N, "rows": [..per run..]}
    python count.py mlflow DIR KEY   -> {"runs": N, "rows": [..per run..]}
"""
import glob
import json
import os
import struct
import sys

BLOCK = 32768


def wandb_history_rows(path):
    """History records in one .wandb file (a LevelDB-style log of protobuf Records)."""
    from wandb.proto import wandb_internal_pb2 as pb
    b = open(path, "rb").read()
    if b[:4] != b":W&B":
        raise SystemExit(f"{path}: not a .wandb file")
    pos, n, buf = 7, 0, b""
    while pos + 7 <= len(b):
        left = BLOCK - (pos % BLOCK)
        if left < 7:
            pos += left
            continue
        _crc, ln, ty = struct.unpack("<IHB", b[pos:pos + 7])
        pos += 7
        if ln == 0 and ty == 0:
            break
        data = b[pos:pos + ln]
        pos += ln
        if ty in (1, 2):
            buf = data
        else:
            buf += data
        if ty in (2, 3):
            continue
        r = pb.Record()
        r.ParseFromString(buf)
        if r.WhichOneof("record_type") == "history":
            n += 1
    return n


def main():
    tool, d = sys.argv[1], sys.argv[2]
    rows = []
    if tool == "wandb":
        # wandb's latest-run is a symlink to a run dir: count each file once.
        files = {os.path.realpath(f) for f in glob.glob(os.path.join(d, "**", "run-*.wandb"), recursive=True)}
        for f in sorted(files):
            rows.append(wandb_history_rows(f))
    elif tool == "mlflow":
        # mlruns/<experiment>/<run>/meta.yaml, with metrics/<key> holding one line per point.
        key = sys.argv[3]
        for meta in sorted(glob.glob(os.path.join(d, "mlruns", "*", "*", "meta.yaml"))):
            f = os.path.join(os.path.dirname(meta), "metrics", key)
            if not os.path.isdir(os.path.join(os.path.dirname(meta), "metrics")):
                continue
            n = 0
            if os.path.exists(f):
                with open(f) as fh:
                    n = sum(1 for _ in fh)
            rows.append(n)
    print(json.dumps({"runs": len(rows), "rows": rows}))


if __name__ == "__main__":
    main()
