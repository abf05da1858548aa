#!/usr/bin/env bash
# Node 22 and 24 beside the machine's node: a unit subset and the quick start (scripts/ci/node-matrix.sh).
exec bash "$(dirname "$0")/../node-matrix.sh"
