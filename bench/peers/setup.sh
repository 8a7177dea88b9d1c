#!/usr/bin/env bash
# Makes the peer benchmark's own venv (bench/peers/.venv): wandb and MLflow
# from PyPI at pinned versions, plus logd's Python client when python/ is
# there. Isolated from the system's site-packages, so each tool runs as its
# users install it. Re-runs only when this file changes.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="$here/.venv"
stamp="$venv/.stamp"
want="$(sha1sum "$0" | cut -c1-12)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then exit 0; fi
py=/usr/bin/python3
[ -x "$py" ] || py="$(command -v python3)"
echo "peers: making $venv (wandb 0.31.0, mlflow-skinny 3.17.2 from PyPI; a minute or two)" >&2
rm -rf "$venv"
"$py" -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check wandb==0.31.0 mlflow-skinny==3.17.2
if [ -f "$root/python/pyproject.toml" ]; then
  "$venv/bin/pip" install -q --disable-pip-version-check "$root/python"
fi
echo "$want" > "$stamp"
