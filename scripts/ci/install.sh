#!/usr/bin/env bash
# What the suites need beyond node_modules, installed only when missing (.ci/run calls it; run it
# alone to warm the cache): Debian packages in ONE apt-get update + install, the nats CLI built once
# into the cache's bin (go install), the Python venvs linked from the cache (scripts/ci/cache.sh).
#   scripts/ci/install.sh [debs|nats-cli|venvs|vegeta]...   (default: the first three, in that order;
#   vegeta, the load generator of `cohort bench overload`, only when asked: no suite needs it)
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=cache.sh
source scripts/ci/cache.sh

# Debian package and how to tell it is there without dpkg (a binary installed another way counts).
have_deb() {
  case "$1" in
    nats-server) command -v nats-server ;;
    redis-server) command -v redis-server ;;
    chromium) [ -x "${CHROMIUM_PATH:-/usr/bin/chromium}" ] ;;
    iproute2) command -v ip ;;
    python3-venv) python3 -c 'import venv, ensurepip' ;;
    *) [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ] ;;
  esac >/dev/null 2>&1
}

debs() {
  # nats-server: e2e and every NATS suite. redis-server: test/redis. chromium: test/browser
  # (playwright-core downloads no browser). iproute2: test/netns (network namespaces, as root).
  # python3-venv: the venvs. libb64-0d: perf_analyzer (test/python) links it.
  local want=(nats-server redis-server chromium iproute2 python3-venv libb64-0d) missing=() p
  for p in "${want[@]}"; do
    have_deb "$p" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    echo "ci: Debian packages present (${want[*]})"
    return
  fi
  echo "ci: installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

NATS_CLI_VERSION=v0.5.1
nats_cli() {
  # The tools suite (test/tools) runs the real `nats` CLI (`nats micro ls`). Built once per version
  # into the cache (a cold Go module and build cache takes a few minutes).
  local bin="$COHORT_CI_CACHE/bin/nats" stamp="$COHORT_CI_CACHE/bin/.nats-$NATS_CLI_VERSION"
  if [ -x "$bin" ] && [ -f "$stamp" ]; then
    echo "ci: nats CLI $NATS_CLI_VERSION cached ($bin)"
    return
  fi
  echo "ci: building the nats CLI (go install github.com/nats-io/natscli/nats@$NATS_CLI_VERSION into $COHORT_CI_CACHE/bin)"
  GOBIN="$COHORT_CI_CACHE/bin" go install "github.com/nats-io/natscli/nats@$NATS_CLI_VERSION"
  touch "$stamp"
}

VEGETA_VERSION=v12.13.0 # bench/src/vegeta.ts builds the same one when it finds none
vegeta() {
  local bin="$COHORT_CI_CACHE/bin/vegeta"
  if [ -x "$bin" ]; then
    echo "ci: vegeta cached ($bin)"
    return
  fi
  echo "ci: building vegeta (go install github.com/tsenart/vegeta/v12@$VEGETA_VERSION into $COHORT_CI_CACHE/bin)"
  GOBIN="$COHORT_CI_CACHE/bin" go install "github.com/tsenart/vegeta/v12@$VEGETA_VERSION"
}

venvs() {
  # test/infra: kubernetes-validate (bundles the pinned Kubernetes schemas). test/python: the Triton
  # clients and perf_analyzer, schemathesis (setup.sh).
  venv_link test/infra/.venv test/infra/requirements.txt infra
  bash test/python/setup.sh
}

for what in "${@:-debs nats-cli venvs}"; do
  for w in $what; do
    case "$w" in
      debs) debs ;;
      nats-cli) nats_cli ;;
      venvs) venvs ;;
      vegeta) vegeta ;;
      *) echo "install.sh: unknown part $w (debs, nats-cli, venvs, vegeta)" >&2; exit 2 ;;
    esac
  done
done
