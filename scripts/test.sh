#!/usr/bin/env bash
# The whole test suite on a fresh machine: creates .venv, installs every extra, starts PostgreSQL,
# then runs lint, types and pytest. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m venv .venv
# llama-cpp-python builds from source (~5 min on 2 cores) the first time; pip's wheel cache reuses it.
.venv/bin/pip install -q --disable-pip-version-check -e ".[local,dev,server,postgres,mcp,otel,bedrock,vertex,prices]"

# A real PostgreSQL server for the store tests (installed from Debian packages if missing).
pg_line=$(bash scripts/postgres.sh | grep '^TOOLWIRE_TEST_POSTGRES_URL=' | tail -n 1)
export "${pg_line?postgres.sh did not print the database URL}"

# Node + the `ai` npm client (AI SDK protocol tests), and the system Chromium (web page tests).
bash scripts/setup_node.sh
bash scripts/setup_chromium.sh
bash scripts/setup_haproxy.sh

.venv/bin/ruff check src tests
.venv/bin/ruff format --check src tests
.venv/bin/mypy
.venv/bin/pytest -q -p no:cacheprovider "$@"
