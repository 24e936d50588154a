#!/usr/bin/env bash
# Node.js (Debian package when missing) and the pinned `ai` npm packages the AI SDK client tests drive.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq nodejs npm >/dev/null
fi
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 18 ]; then
    echo "node $major is too old for the ai package (18+ needed)" >&2
    exit 1
fi
(cd tests/server/node && npm ci --no-audit --no-fund --loglevel=error)
