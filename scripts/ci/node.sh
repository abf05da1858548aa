#!/usr/bin/env bash
# Print the bin folder of Node VERSION (the official build, from the npm registry's node-linux-<arch>
# package), installed into the CI cache (COHORT_CI_CACHE, default ~/.cache/cohort-ci) when missing.
# Usage: dir="$(bash scripts/ci/node.sh 22.23.5)"; PATH="$dir:$PATH"
set -euo pipefail
v="$1"
cache="${COHORT_CI_CACHE:-$HOME/.cache/cohort-ci}"
case "$(uname -m)" in x86_64) arch=x64 ;; aarch64) arch=arm64 ;; *) echo "node.sh: unsupported arch $(uname -m)" >&2; exit 1 ;; esac
dir="$cache/node-$v-linux-$arch"
if [ ! -x "$dir/bin/node" ]; then
  echo "node.sh: installing node-linux-$arch@$v (npm registry) into $dir" >&2
  tmp="$(mktemp -d)"
  (cd "$tmp" && npm pack --silent "node-linux-$arch@$v" >/dev/null)
  mkdir -p "$dir"
  tar xzf "$tmp"/node-linux-"$arch"-"$v".tgz -C "$dir" --strip-components=1 package/bin/node
  rm -rf "$tmp"
fi
[ "$("$dir/bin/node" --version)" = "v$v" ] || { echo "node.sh: $dir/bin/node is not v$v" >&2; exit 1; }
echo "$dir/bin"
