#!/usr/bin/env bash
# The system Chromium (Debian package) that the Playwright page test drives; Playwright's own browser
# download is never used.
set -euo pipefail
if [ ! -x /usr/bin/chromium ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq chromium >/dev/null
fi
/usr/bin/chromium --version
