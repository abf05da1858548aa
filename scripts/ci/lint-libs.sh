#!/usr/bin/env bash
# npm run lint:libs: the libs type-check without Node types (edge runtimes load them), all in one tsc
# program (tsconfig.libs.json), and none of them pulls Node's types in through a dependency (in one
# program that would hide a Node API used in any other lib).
set -euo pipefail
cd "$(dirname "$0")/../.."
files=$(node_modules/.bin/tsc -p tsconfig.libs.json --listFiles) || { grep -v "^/" <<<"$files"; exit 1; }
if grep '/@types/node/' <<<"$files" >/dev/null; then
  echo "lint:libs: a lib brings in @types/node (it must run without Node); per lib: tsc -p libs/NAME/tsconfig.lib.json --listFilesOnly | grep @types/node" >&2
  exit 1
fi
echo "lint:libs: $(grep -c '/libs/[^/]*/src/' <<<"$files") lib files type-check without Node types"
