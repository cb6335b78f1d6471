#!/usr/bin/env bash
# Installs LiteLLM's proxy, pinned, into target/litellm-venv for host/benches/serve_load.py,
# which runs it beside `rampart serve` against the same instant upstream so that every table
# carries its anchor measured in the same run (issue 26).
#
# Usage, from anywhere:   host/benches/litellm-venv.sh
#   LITELLM_VERSION=1.110.2 host/benches/litellm-venv.sh   # measure another release
#
# Needs python3 (3.9 or newer, with venv) and PyPI. Idempotent: a venv that already has the
# pinned version is kept. At run time nothing is fetched: serve_load.py starts the proxy with
# the local cost map, telemetry off and no database.
#
# Why 1.106.12: the newest release whose `proxy` extra resolves from PyPI as of 2026-11-27
# (1.108.x pins post-releases of litellm-proxy-extras and litellm-enterprise that the index
# does not serve, 1.110.x a litellm-proxy package it does not have), and before the withdrawn
# 1.107.0. The issue's first table was taken with 1.108.
set -euo pipefail

version=${LITELLM_VERSION:-1.106.12}
root=$(cd "$(dirname "$0")/../.." && pwd)
venv=$root/target/litellm-venv

if [[ -x $venv/bin/litellm ]] &&
  [[ $("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("litellm"))' 2>/dev/null) == "$version" ]]; then
  echo "litellm $version is already in $venv"
  exit 0
fi

python=${PYTHON:-python3}
command -v "$python" >/dev/null || { echo "python3 is missing: install Python 3.9 or newer" >&2; exit 2; }
mkdir -p "$root/target"
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check "litellm[proxy]==$version"
echo "litellm $version installed in $venv"
