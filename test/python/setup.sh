#!/usr/bin/env bash
# Create test/python/.venv with the pinned Triton client tools (tritonclient[all], perf_analyzer), and
# test/python/.venv-schemathesis with schemathesis (requirements-schemathesis.txt).
# Idempotent: a venv whose installed set matches its requirements file is kept.
set -euo pipefail
cd "$(dirname "$0")"
if ! dpkg -s libb64-0d >/dev/null 2>&1; then
  echo "python suite: installing libb64-0d (Debian package; perf_analyzer links it)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq libb64-0d >/dev/null
fi
st_stamp=.venv-schemathesis/.requirements.sha256
st_want=$(sha256sum requirements-schemathesis.txt | cut -d' ' -f1)
if ! [ -x .venv-schemathesis/bin/schemathesis ] || [ "$(cat "$st_stamp" 2>/dev/null)" != "$st_want" ]; then
  python3 -m venv .venv-schemathesis
  .venv-schemathesis/bin/pip install -q --disable-pip-version-check -r requirements-schemathesis.txt
  echo "$st_want" > "$st_stamp"
  echo "python suite: $(.venv-schemathesis/bin/schemathesis --version)"
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
