#!/usr/bin/env bash
# Create test/python/.venv with the pinned Triton client tools (tritonclient[all], perf_analyzer).
# Idempotent: a venv whose installed set matches requirements.txt is kept.
set -euo pipefail
cd "$(dirname "$0")"
if ! dpkg -s libb64-0d >/dev/null 2>&1; then
  echo "python suite: installing libb64-0d (Debian package; perf_analyzer links it)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq libb64-0d >/dev/null
fi
stamp=.venv/.requirements.sha256
want=$(sha256sum requirements.txt | cut -d' ' -f1)
if [ -x .venv/bin/perf_analyzer ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
python3 -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check -r requirements.txt
echo "$want" > "$stamp"
echo "python suite: venv ready ($(.venv/bin/python -c 'import tritonclient, importlib.metadata as m; print("tritonclient", m.version("tritonclient"))'))"
