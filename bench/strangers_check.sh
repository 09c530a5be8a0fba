#!/usr/bin/env bash
# A stranger's check (docs/reproducing.md): a fresh clone of SOURCE, the README's install command in a fresh venv,
# `irpipe reproduce --max-cost COST` from empty caches, then `git status --porcelain`, which must be empty.
#
#     bash bench/strangers_check.sh [SOURCE [COST]]     # defaults: this checkout, 10m
#
# The mirror is $IRPIPE_MIRROR, else ../shared/data beside SOURCE (as .ci/run). Prints the load average at each step,
# the install's and the reproduce's wall seconds; exits with reproduce's status, or 1 if the checkout changed.
set -uo pipefail
source_repo="$(cd "${1:-$(dirname "$0")/..}" && pwd)"
cost="${2:-10m}"
export IRPIPE_MIRROR="${IRPIPE_MIRROR:-$(cd "$source_repo/.." && pwd)/shared/data}"
work="$(mktemp -d)"
load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "start $(date -u +%FT%TZ), load $(load), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores"
git clone -q "$source_repo" "$work/irpipe" && cd "$work/irpipe" || exit 2
echo "commit $(git rev-parse --short HEAD)"
started=$(date +%s)
python3 -m venv .venv && . .venv/bin/activate && pip install -q -e ".[test,pyterrier]" > "$work/install.log" 2>&1 \
    || { echo "install failed: $work/install.log"; exit 2; }
echo "install: $(( $(date +%s) - started )) s, load $(load)"
started=$(date +%s)
IRPIPE_CACHE="$(mktemp -d)" irpipe reproduce --max-cost "$cost"
status=$?
echo "reproduce: exit $status, $(( $(date +%s) - started )) s, load $(load), end $(date -u +%FT%TZ)"
changed="$(git status --porcelain)"
if [ -n "$changed" ]; then
    printf 'the checkout changed:\n%s\n' "$changed"
    exit 1
fi
echo "git status --porcelain: empty"
exit "$status"
