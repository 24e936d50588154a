#!/usr/bin/env bash
# The benchmarks' own environment: toolwire plus the peers it is compared with. The peers are never
# toolwire dependencies; versions are pinned so numbers from different runs compare.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv benchmarks/.venv
benchmarks/.venv/bin/pip install -q --disable-pip-version-check -e ".[postgres,server]" \
    "pydantic-ai-slim[openai,anthropic,google]==${PYDANTIC_AI_VERSION:-2.68.0}" \
    "openai-agents==${OPENAI_AGENTS_VERSION:-0.24.0}" \
    "langgraph==${LANGGRAPH_VERSION:-1.2.22}" \
    "langgraph-checkpoint-sqlite==${LANGGRAPH_SQLITE_VERSION:-3.1.2}" \
    "langchain-core==${LANGCHAIN_CORE_VERSION:-1.7.2}" "certifi<=2026.10.18" \
    "litellm==${LITELLM_VERSION:-1.83.0}"
