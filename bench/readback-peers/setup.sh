#!/usr/bin/env bash
# Makes the reading-back comparison's own venv (bench/readback-peers/.venv): MLflow (with SQLAlchemy and Alembic
# for its SQLite store, pandas for search_runs) and TensorBoard from PyPI at pinned versions, over Debian's
# /usr/bin/python3 and its site-packages (torch, for torch.utils.tensorboard's SummaryWriter; numpy). logd is not
# installed here: its reads run in .venv-python, each tool in its own environment. Re-runs only when this file
# changes.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="$here/.venv"
stamp="$venv/.stamp"
want="$(sha1sum "$0" | cut -c1-12)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then exit 0; fi
py=/usr/bin/python3
echo "readback-peers: making $venv (mlflow-skinny 3.17.2, sqlalchemy, alembic, pandas 2.1.4, tensorboard 2.20.0 from PyPI; a minute or two)" >&2
rm -rf "$venv"
"$py" -m venv --system-site-packages "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check mlflow-skinny==3.17.2 'sqlalchemy>=2,<3' 'alembic<2' pandas==2.1.4 tensorboard==2.20.0
echo "$want" > "$stamp"
