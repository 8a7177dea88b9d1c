#!/usr/bin/env bash
# Makes .venv-python: Debian's /usr/bin/python3 (which has torch, grpcio and
# protobuf from scripts/install-system-deps.sh) with the logd Python client
# from python/ installed into it. Re-installs when python/ changed. Never
# fails the build: without a usable Python it says why, and the Python tests
# skip with that reason.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${LOGD_TEST_PYTHON_BASE:-/usr/bin/python3}
VENV=.venv-python
stamp=$VENV/.logd-installed
if [ ! -x "$PY" ]; then
  echo "python: $PY not found; install python3 (scripts/install-system-deps.sh); the Python tests will skip" >&2
  exit 0
fi
newest=$(find python -type f -newer "$stamp" 2>/dev/null | grep -v -e __pycache__ -e '\.egg-info' | head -1)
if [ -f "$stamp" ] && [ -z "$newest" ]; then
  exit 0
fi
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv --system-site-packages "$VENV" || { echo "python: could not make a venv with $PY (install python3-venv); the Python tests will skip" >&2; exit 0; }
fi
# --no-build-isolation: build with the system's setuptools, and take grpcio and
# protobuf from the system site-packages when they satisfy python/pyproject.toml.
# The frameworks of logd.integrations, for their tests only; without them those tests skip.
if ! "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps -r python/integrations-requirements.txt >/tmp/logd-pip-integrations.log 2>&1; then
  echo "python: the integration frameworks did not install (see /tmp/logd-pip-integrations.log); their tests will skip" >&2
fi
# pandas for logd.Api's DataFrames (the `read` extra), for its tests only; without it those tests skip.
if ! "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps -r python/read-requirements.txt >/tmp/logd-pip-read.log 2>&1; then
  echo "python: pandas did not install (see /tmp/logd-pip-read.log); the DataFrame tests will skip" >&2
fi
if "$VENV/bin/pip" install -q --disable-pip-version-check --no-build-isolation ./python >/tmp/logd-pip.log 2>&1; then
  rm -rf python/build python/*.egg-info
  touch "$stamp"
else
  echo "python: pip install ./python failed (see /tmp/logd-pip.log); the Python tests will skip" >&2
  tail -n 20 /tmp/logd-pip.log >&2
fi
exit 0
