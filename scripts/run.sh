#!/usr/bin/env bash
# Quick start, command 1: set up, build, and run the main job on its embedded
# default (the CAIS reduction core demo). Extra arguments go to inca-demo
# (see `build/release/bin/inca-demo --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh release
exec build/release/bin/inca-demo "$@"
