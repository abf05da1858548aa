#!/usr/bin/env bash
# Link test/python/.venv to a venv with the pinned Triton client tools (tritonclient[all],
# perf_analyzer: requirements.txt), and test/python/.venv-schemathesis to one with schemathesis
# (requirements-schemathesis.txt). The venvs live in the CI cache outside the checkout
# (scripts/ci/cache.sh: $COHORT_CI_CACHE, default ~/.cache/cohort-ci), keyed on the hash of their
# requirements file, so a later clone reuses them; a changed file builds a new one.
set -euo pipefail
cd "$(dirname "$0")"
# shellcheck source=../../scripts/ci/cache.sh
source ../../scripts/ci/cache.sh
if ! dpkg -s libb64-0d >/dev/null 2>&1; then
  echo "python suite: installing libb64-0d (Debian package; perf_analyzer links it)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq libb64-0d >/dev/null
fi
venv_link .venv-schemathesis requirements-schemathesis.txt python-schemathesis
venv_link .venv requirements.txt python-triton
