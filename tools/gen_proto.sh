#!/bin/sh
# Regenerates profiler/report/render/proto/profile_pb2.py from profile.proto with the protoc
# bundled in grpcio-tools (PyPI), installed into a throw-away virtualenv: the generated module
# is committed, so neither protoc nor grpcio-tools is needed to install or run profiler.
# The generated code needs a protobuf runtime at least as new as the protoc that made it
# (pyproject.toml pins it).
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
dir=profiler/report/render/proto
venv=$(mktemp -d)
trap 'rm -rf "$venv"' EXIT
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet "grpcio-tools==1.85.1"
cd "$here"
"$venv/bin/python" -m grpc_tools.protoc --proto_path="$dir" --python_out="$dir" "$dir/profile.proto"
"$venv/bin/python" -m grpc_tools.protoc --version
