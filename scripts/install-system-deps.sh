#!/usr/bin/env bash
# Installs the Debian packages logd's native addon and reference tests use:
#   libtorch-dev + libgloo-dev  (c10d with gloo, for the native addon)
#   python3-torch               (PyTorch DDP reference runs and benchmarks)
#   python3-grpcio, python3-protobuf, python3-numpy, python3-pil, python3-venv,
#   python3-setuptools, python3-wheel, protobuf-compiler
#                               (the Python client, its tests and the check
#                                that its generated wire code is current)
#   python3-dev                 (Python's headers: log()'s compiled hot path, python/logd/hot/_hot.c)
#   chromium, fonts-liberation  (the dashboard's browser tests, through playwright-core; fonts for its screenshots)
#   postgresql                  (the shared store's tests start a throwaway PostgreSQL 15)
# Everything else in logd works without them: the native tests then skip with
# the reason. Runs apt-get only when something is missing and we are root.
set -uo pipefail
pkgs=(libtorch-dev libgloo-dev python3-torch cmake g++ python3-dev python3-grpcio python3-protobuf python3-numpy python3-pil python3-venv python3-setuptools python3-wheel protobuf-compiler chromium fonts-liberation postgresql)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "system-deps: missing ${missing[*]}; install them with: sudo apt-get install -y ${missing[*]} (native and browser tests will skip until then)" >&2
  exit 0
fi
echo "system-deps: installing ${missing[*]} (apt-get)" >&2
export DEBIAN_FRONTEND=noninteractive
timeout 600 apt-get update -qq || echo "system-deps: apt-get update failed; trying the install anyway" >&2
if ! timeout 1500 apt-get install -y -qq --no-install-recommends "${missing[@]}" >/tmp/logd-apt.log 2>&1; then
  echo "system-deps: apt-get install failed (see /tmp/logd-apt.log); native or browser tests will skip" >&2
  tail -n 20 /tmp/logd-apt.log >&2
fi
exit 0
