#!/usr/bin/env bash
# Creates test/peers/.venv (gitignored) for `cohort bench peers` (docs/benchmarks.md, "Side by side"):
# the peers Cohort is compared with, each serving the demo ONNX model through onnxruntime (CPU).
# Not part of CI or of `npm test` / `npm run test:all`. Needs python3 (3.9-3.12; PyTriton's
# wheels have stubs for 3.8-3.13) and PyPI. Re-running it is cheap when the venv is up to date.
#
#   nvidia-pytriton  Triton Inference Server (bundled tritonserver binary): Triton's dynamic
#                    batcher in front of its Python backend, which calls onnxruntime in Python
#   ray[serve]       Ray Serve with @serve.batch
#   litserve         LitServe
#   bentoml          BentoML with adaptive batching
# TorchServe is left out (not attempted): its Python worker imports torch, whose default PyPI wheel
# for Linux pulls several GB of CUDA libraries, it also needs a JDK, and the project is in limited
# maintenance.
#
# requirements.lock pins every transitive package (pip freeze of a working venv); the top-level
# pins below are the ones that matter when the lock has to be regenerated:
#   test/peers/.venv/bin/pip install <the pins> && test/peers/.venv/bin/pip freeze > test/peers/requirements.lock
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
PY="${PYTHON:-python3}"
PINS=(nvidia-pytriton==0.7.0 "ray[serve]==2.60.0" litserve==0.2.19 bentoml==1.4.40 onnxruntime==1.32.0 numpy==1.26.4)

if [ ! -x "$here/.venv/bin/python" ]; then
  "$PY" -m venv "$here/.venv"
fi
"$here/.venv/bin/pip" install --quiet --upgrade pip
"$here/.venv/bin/pip" install --quiet -c "$here/requirements.lock" "${PINS[@]}"

# Smoke checks: every peer imports, and the tritonserver binary bundled with PyTriton starts here.
"$here/.venv/bin/python" - <<'PYEOF'
import importlib
for m in ["onnxruntime", "numpy", "pytriton.triton", "ray.serve", "litserve", "bentoml"]:
    importlib.import_module(m)
print("peers venv: imports ok")
PYEOF
tritonserver="$("$here/.venv/bin/python" -c 'import pytriton, os; print(os.path.join(os.path.dirname(pytriton.__file__), "tritonserver", "bin", "tritonserver"))')"
# (`--help` exits 1 after printing its usage; a missing library prints no usage.)
usage="$("$tritonserver" --help 2>&1 || true)"
if [[ "$usage" != *"Usage: tritonserver"* ]]; then
  echo "setup.sh: $tritonserver does not start on this machine:" >&2
  ldd "$tritonserver" | grep 'not found' >&2 || true
  exit 1
fi
echo "peers venv ready: $here/.venv (run: node apps/cli/bin/cohort.js bench peers)"
