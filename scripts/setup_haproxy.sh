#!/usr/bin/env bash
# HAProxy from Debian's packages: the round-robin load balancer in front of the server replicas in the
# scale-out tests (tests/scaleout). Idempotent: installs only when missing.
set -euo pipefail
if ! command -v haproxy >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    if [ "$(id -u)" -eq 0 ]; then apt-get update -qq; else sudo apt-get update -qq; fi
    if [ "$(id -u)" -eq 0 ]; then
        apt-get install -y -qq haproxy >/dev/null
    else
        sudo apt-get install -y -qq haproxy >/dev/null
    fi
fi
# No pipe into head: with pipefail, haproxy's SIGPIPE when head exits first would fail the script.
version=$(haproxy -v)
echo "${version%%$'\n'*}"
