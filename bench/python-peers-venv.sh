#!/usr/bin/env bash
# The Python peer benchmark's own venv (.venv-bench-python, ignored by git):
# wandb and MLflow's client (mlflow-skinny) from PyPI, next to logd's client
# from python/. Kept apart from .venv-python so the tests never see them.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-/usr/bin/python3}
VENV=.venv-bench-python
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check wandb mlflow-skinny ./python
rm -rf python/build python/*.egg-info
echo "ready: $VENV/bin/python bench/python_peers.py"
