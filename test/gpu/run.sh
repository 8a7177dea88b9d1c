#!/usr/bin/env bash
# logd on a machine with an NVIDIA GPU: the checks CI cannot run (no GPU there).
# See test/gpu/README.md for what it checks and what was seen.
#
#   bash test/gpu/run.sh OUTDIR
#
# Needs on PATH: nvidia-smi, `logd` (the wheel or the npm package) and a python3
# whose torch has CUDA and that can import logd. For the native NCCL part also
# cmake and a C++ compiler, dist/ built (`make build`), and the headers named by
# LOGD_NODE_INCLUDE (the folder holding node_api.h) and NODE_ADDON_API_DIR
# (node-addon-api's folder); without them that part is skipped, saying why.
# Every step has its own deadline; a failed step is reported and the rest run.
# Writes OUTDIR/summary.txt and OUTDIR/gpu-check.tar.gz (every capture and log).
set -u
OUT=$(mkdir -p "${1:?usage: run.sh OUTDIR}" && cd "$1" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
W=$OUT/work
mkdir -p "$W/nvidia-smi"
exec > >(tee "$OUT/summary.txt") 2>&1
FAILED=()
step() { echo; echo "== $* ($(date -u +%T))"; }
fail() { echo "FAIL: $*"; FAILED+=("$*"); }
finish() {
  logd stop >/dev/null 2>&1 || true
  tar -C "$W" -czf "$OUT/gpu-check.tar.gz" . 2>/dev/null
  echo
  if [ ${#FAILED[@]} -eq 0 ]; then echo "gpu-check: all steps passed"; else printf 'gpu-check: failed: %s\n' "${FAILED[@]}"; fi
}
trap finish EXIT

export LOGD_DIR=$W/logd-data LOGD_RUNTIME_DIR=/tmp/logd-gpu-rt PYTHONUNBUFFERED=1
mkdir -p "$LOGD_DIR"
S=$W/nvidia-smi
# The field list logd's sampler asks for, read from its source (GPU_QUERY_FIELDS).
Q="--query-gpu=$(sed -n '/^export const GPU_QUERY_FIELDS = \[/,/^\]/p' "$ROOT/daemon/sampler/nvidia-smi.ts" | grep -o "'[^']*'" | tr -d "'" | paste -sd, -)"
[ "$Q" != "--query-gpu=" ] || fail "could not read GPU_QUERY_FIELDS from daemon/sampler/nvidia-smi.ts"
CA="--query-compute-apps=pid,gpu_uuid,used_memory"

step "machine"
nvidia-smi -L | tee "$S/nvidia-smi-L.txt"
nvidia-smi --version > "$S/nvidia-smi-version.txt"; head -3 "$S/nvidia-smi-version.txt"
python3 -c 'import torch; c = torch.cuda.is_available(); print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version() if c else None, torch.cuda.get_device_name(0) if c else "no GPU")'
echo "node $(node --version); logd $(logd --version 2>&1 | head -1); $(nproc) cores; $(uname -r)"
echo "query: $Q"

# The native build runs beside the rest (16 cores there; it only compiles).
NATIVE_LOG=$W/native-build.log
native_build() {
  local prefix
  prefix=$(python3 -c 'import torch.utils; print(torch.utils.cmake_prefix_path)') || return 1
  local tinc
  tinc=$(python3 -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "include"))')
  local gloo=ON
  [ -f "$tinc/gloo/algorithm.h" ] || [ -f /usr/include/gloo/algorithm.h ] || gloo=OFF
  echo "gloo headers: $gloo ($tinc/gloo)"
  local gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  cmake -S "$ROOT/native" -B /tmp/logd-native-build "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_STANDARD="${LOGD_CXX_STANDARD:-20}" -DLOGD_WITH_GLOO=$gloo \
    -DCMAKE_JS_INC="$LOGD_NODE_INCLUDE" -DNODE_ADDON_API_DIR="$NODE_ADDON_API_DIR" -DCMAKE_LIBRARY_OUTPUT_DIRECTORY=/tmp/logd-native-build/Release \
    && cmake --build /tmp/logd-native-build -j "$(nproc)" \
    && mkdir -p "$ROOT/native/build/Release" && cp /tmp/logd-native-build/Release/logd_native.node "$ROOT/native/build/Release/"
}
NATIVE_PID=
if [ -n "${LOGD_NODE_INCLUDE:-}" ] && [ -n "${NODE_ADDON_API_DIR:-}" ] && command -v cmake >/dev/null; then
  (timeout 300 bash -c "$(declare -f native_build); ROOT='$ROOT' LOGD_NODE_INCLUDE='$LOGD_NODE_INCLUDE' NODE_ADDON_API_DIR='$NODE_ADDON_API_DIR' LOGD_CXX_STANDARD='${LOGD_CXX_STANDARD:-}' native_build" > "$NATIVE_LOG" 2>&1; echo $? > "$W/native-build.rc") &
  NATIVE_PID=$!
fi

step "nvidia-smi, idle (logd's own commands)"
nvidia-smi > "$S/idle-nvidia-smi.txt"
nvidia-smi -q > "$S/idle-nvidia-smi-q.txt"
nvidia-smi "$Q" --format=csv,noheader,nounits > "$S/idle-query-gpu.csv"; cat "$S/idle-query-gpu.csv"
nvidia-smi "$Q" --format=csv > "$S/idle-query-gpu-with-header.csv"
timeout 3 nvidia-smi "$Q" --format=csv,noheader,nounits -lms 500 > "$S/idle-query-gpu-loop-lms500.csv"
echo "loop lines in 3 s: $(wc -l < "$S/idle-query-gpu-loop-lms500.csv")"
nvidia-smi "$CA" --format=csv,noheader,nounits > "$S/idle-compute-apps.csv"; echo "idle compute-apps bytes: $(wc -c < "$S/idle-compute-apps.csv")"

step "daemon: logd serve --sample-interval 500"
logd serve --sample-interval 500 > "$W/daemon.log" 2>&1 &
for _ in $(seq 1 100); do [ -f "$LOGD_RUNTIME_DIR/service.json" ] && break; sleep 0.1; done
[ -f "$LOGD_RUNTIME_DIR/service.json" ] || fail "daemon did not write its service file in 10 s"
logd status 2>&1 | head -20

step "CUDA trainer (test/gpu/train_cuda.py), loaded captures at +8 s"
timeout 120 python3 "$ROOT/test/gpu/train_cuda.py" 14 > "$W/train_cuda.out" 2>&1 &
TRAIN=$!
sleep 8
nvidia-smi > "$S/loaded-nvidia-smi.txt"
nvidia-smi "$Q" --format=csv,noheader,nounits > "$S/loaded-query-gpu.csv"; cat "$S/loaded-query-gpu.csv"
nvidia-smi "$Q" --format=csv > "$S/loaded-query-gpu-with-header.csv"
timeout 3 nvidia-smi "$Q" --format=csv,noheader,nounits -lms 500 > "$S/loaded-query-gpu-loop-lms500.csv"
nvidia-smi "$CA" --format=csv,noheader,nounits > "$S/loaded-compute-apps.csv"; echo "compute-apps: $(cat "$S/loaded-compute-apps.csv") (trainer pid $TRAIN)"
wait $TRAIN || fail "train_cuda.py exited $?"
cat "$W/train_cuda.out"
RUN=$(sed -n 's/^RUN //p' "$W/train_cuda.out" | head -1)

if [ -n "$RUN" ]; then
  step "what logd stored of $RUN"
  timeout 60 logd show "$RUN" > "$W/show.txt" 2>&1 || fail "logd show $RUN"
  cat "$W/show.txt" | head -60
  timeout 60 logd export "$RUN" --system --format jsonl --output "$W/system.jsonl" --force || fail "logd export --system"
  timeout 60 logd export "$RUN" --format csv --output "$W/history.csv" --force || fail "logd export"
  echo "history rows: $(($(wc -l < "$W/history.csv") - 1))"
  timeout 60 logd media "$RUN" > "$W/media.txt" 2>&1 || fail "logd media"
  head -20 "$W/media.txt"
  python3 "$ROOT/test/gpu/check_system.py" "$W/system.jsonl" || fail "the sampler's view of the GPU during the CUDA run"
fi

step "log() of CUDA tensors does not wait for the GPU (test/gpu/device_values.py)"
timeout 180 python3 "$ROOT/test/gpu/device_values.py" > "$W/device_values.out" 2>&1 || fail "device_values.py exited $?"
cat "$W/device_values.out"

step "torchrun, DDP over NCCL, 1 process per GPU (test/gpu/ddp_nccl.py)"
NGPU=$(nvidia-smi -L | grep -c '^GPU ')
timeout 120 python3 -m torch.distributed.run --nproc_per_node "$NGPU" "$ROOT/test/gpu/ddp_nccl.py" > "$W/ddp_nccl.out" 2>&1 || fail "torchrun ddp_nccl.py exited $?"
tail -15 "$W/ddp_nccl.out"
DDP_RUN=$(sed -n 's/^RUN //p' "$W/ddp_nccl.out" | head -1)
if [ -n "$DDP_RUN" ]; then
  timeout 60 logd export "$DDP_RUN" --format jsonl --output "$W/ddp_nccl.jsonl" --force
  python3 - "$W/ddp_nccl.jsonl" <<'PY' || fail "run.watch() over NCCL: no logd/ddp/* figures at the loop's steps"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
timed = [r for r in rows if "logd/ddp/wait_ms" in r]
print("run.watch over NCCL: %d rows, %d with logd/ddp/wait_ms; median wait %.3f ms, buckets %s" % (
    len(rows), len(timed), sorted(r["logd/ddp/wait_ms"] for r in timed)[len(timed) // 2] if timed else float("nan"),
    timed[-1]["logd/ddp/buckets"] if timed else None))
sys.exit(0 if len(rows) == 200 and len(timed) >= 190 and [r["_step"] for r in rows] == list(range(200)) else 1)
PY
fi
timeout 60 logd runs 2>&1 | head -6

step "native addon over libtorch c10d with NCCL"
if [ -z "$NATIVE_PID" ]; then
  echo "skipped: LOGD_NODE_INCLUDE / NODE_ADDON_API_DIR unset or no cmake"
else
  wait "$NATIVE_PID"
  rc=$(cat "$W/native-build.rc" 2>/dev/null || echo '?')
  grep -E "logd_native|gloo headers|error|Error" "$NATIVE_LOG" | head -30
  if [ "$rc" != 0 ]; then
    fail "native build exited $rc (see native-build.log)"; tail -40 "$NATIVE_LOG"
  else
    (cd "$ROOT" && node -e "import('./dist/native/index.js').then(n => console.log('addon:', n.isAvailable() ? JSON.stringify(n.buildInfo()) : n.loadError()))")
    backends=$(cd "$ROOT" && node -e "import('./dist/native/index.js').then(n => console.log(n.buildInfo().backends.join(' ')))")
    for backend in $backends; do
      port=$((29600 + RANDOM % 1000))
      LOGD_TEST_BACKEND=$backend timeout 60 node "$ROOT/test/native/worker.mjs" ops 0 1 "tcp://127.0.0.1:$port" 30000 > "$W/native-$backend.out" 2>&1
      echo "native $backend ops (1 rank): exit $?"; tail -3 "$W/native-$backend.out" | cut -c1-600
    done
    grep -q '^RESULT {"sum' "$W/native-nccl.out" || fail "native NCCL ops did not complete"
    grep -q 'destroy_process_group() was not called' "$W/native-nccl.out" && echo "note: libtorch warned that the NCCL group was not shut down"

    step "DDP example over NCCL (1 rank per GPU) against PyTorch DDP's weights"
    d=$W/ddp; mkdir -p "$d"; port=$((30700 + RANDOM % 1000))
    MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RANK=0 WORLD_SIZE=1 timeout 120 python3 "$ROOT/test/native/ref_ddp.py" "$d" 0 > "$d/ref.out" 2>&1 || { fail "ref_ddp.py"; tail "$d/ref.out"; }
    (cd "$ROOT" && timeout 120 logd launch --nproc-per-node 1 --master-port $((port + 1)) dist/examples/ddp/train.js --backend nccl \
      --init "$d/initial.json" --indices "$d/indices.json" --out "$d/ts.json" --log none --timeout-ms 60000) > "$d/train.out" 2>&1 || fail "logd launch ... train.js --backend nccl"
    tail -4 "$d/train.out"
    python3 - "$d" <<'PY' || fail "DDP over NCCL does not match PyTorch within 1e-5"
import json, sys
d = sys.argv[1]
ref, ts, init = (json.load(open("%s/%s.json" % (d, n))) for n in ("final", "ts", "initial"))
diff = max([abs(a - b) for a, b in zip(ts["weight"], ref["weight"])] + [abs(ts["bias"] - ref["bias"])])
moved = min(abs(a - b) for a, b in zip(ts["weight"], init["weight"]))
print("DDP over NCCL: steps %d, max |weight - PyTorch's| = %.3g, smallest move from the initial weights %.3g" % (ts["steps"], diff, moved))
sys.exit(0 if diff < 1e-5 and moved > 1e-4 else 1)
PY
  fi
fi

step "bench/media.py --quick on this machine (CPU histograms, scalar log(), console)"
if [ -n "${LOGD_GPU_CHECK_SKIP_BENCH:-}" ]; then
  echo "skipped: LOGD_GPU_CHECK_SKIP_BENCH is set"
elif [ -f "$ROOT/bench/media.py" ]; then
  (cd "$ROOT" && LOGD_BIN="$(command -v logd)" timeout 100 python3 bench/media.py --quick > "$W/bench-media.out" 2>&1) || fail "bench/media.py --quick exited $?"
  tail -30 "$W/bench-media.out"
fi
