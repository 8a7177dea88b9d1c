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
# logd's client is installed again whenever python/ changed (same version number: --force-reinstall), without
# making the venv again.
logd_stamp="$venv/.stamp-logd"
logd_want=""
[ -f "$root/python/pyproject.toml" ] && logd_want="$(cd "$root" && find python -type f ! -path 'python/build/*' ! -path '*__pycache__*' ! -path '*.egg-info*' ! -name '*.so' | sort | xargs sha1sum | sha1sum | cut -c1-12)"
install_logd() {
  [ -n "$logd_want" ] || return 0
  "$venv/bin/pip" install -q --disable-pip-version-check --force-reinstall --no-deps "$root/python"
  echo "$logd_want" > "$logd_stamp"
}
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  if [ -n "$logd_want" ] && [ "$(cat "$logd_stamp" 2>/dev/null)" != "$logd_want" ]; then
    echo "peers: python/ changed; installing logd's client again" >&2
    install_logd
  fi
  exit 0
fi
py=/usr/bin/python3
[ -x "$py" ] || py="$(command -v python3)"
echo "peers: making $venv (wandb 0.31.0, mlflow-skinny 3.17.2 from PyPI; a minute or two)" >&2
rm -rf "$venv"
"$py" -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check wandb==0.31.0 mlflow-skinny==3.17.2
if [ -f "$root/python/pyproject.toml" ]; then
  "$venv/bin/pip" install -q --disable-pip-version-check "$root/python"
  echo "$logd_want" > "$logd_stamp"
fi
echo "$want" > "$stamp"
