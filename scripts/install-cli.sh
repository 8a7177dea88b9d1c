#!/usr/bin/env bash
# `make install`: puts a `logd` command on PATH that runs this checkout's
# CLI (dist/daemon/cli.js) with the Node that built it. PREFIX defaults to
# /usr/local as root and ~/.local otherwise; the command goes to PREFIX/bin.
# `make uninstall` (this script with --remove) takes it away again, and only
# a `logd` this script wrote.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
if [ "$(id -u)" = 0 ]; then default=/usr/local; else default="$HOME/.local"; fi
prefix=${PREFIX:-$default}
bin="$prefix/bin"
target="$bin/logd"
marker='# logd: written by scripts/install-cli.sh'
if [ "${1:-}" = "--remove" ]; then
  if [ -f "$target" ] && grep -qF "$marker" "$target"; then rm -f "$target"; echo "install: removed $target"; else echo "install: no logd of ours at $target"; fi
  exit 0
fi
cli="$root/dist/daemon/cli.js"
if [ ! -f "$cli" ]; then
  echo "install: $cli is missing; run \`make build\` first (\`make install\` does)" >&2
  exit 1
fi
node=$(command -v node || true)
if [ -z "$node" ]; then echo "install: no node on PATH" >&2; exit 1; fi
if [ -e "$target" ] && ! grep -qF "$marker" "$target" 2>/dev/null; then
  echo "install: $target exists and is not ours; remove it or set PREFIX" >&2
  exit 1
fi
mkdir -p "$bin"
tmp=$(mktemp "$bin/.logd.XXXXXX")
cat >"$tmp" <<SCRIPT
#!/bin/sh
$marker (from $root)
exec "$node" "$cli" "\$@"
SCRIPT
chmod 755 "$tmp"
mv -f "$tmp" "$target"
echo "install: $target runs $cli"
case ":$PATH:" in
  *":$bin:"*) ;;
  *) echo "install: $bin is not on your PATH; add it (export PATH=\"$bin:\$PATH\") to run \`logd\`" ;;
esac
