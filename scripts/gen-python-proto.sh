#!/usr/bin/env bash
# Regenerates the Python client's wire code (python/logd/_pb/logd_pb2.py) from
# proto/logd/v1/logd.proto with protoc (Debian's protobuf-compiler). Run it
# after every change to the proto; test/python/client.test.ts checks it is current.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
protoc -I proto --python_out="$tmp" logd/v1/logd.proto
cp "$tmp/logd/v1/logd_pb2.py" python/logd/_pb/logd_pb2.py
echo "python/logd/_pb/logd_pb2.py regenerated from proto/logd/v1/logd.proto"
