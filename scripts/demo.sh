#!/usr/bin/env bash
# The README's first command: installs what the demo needs, builds, and runs it (as root).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
npm run build --silent
exec npx tsx scripts/demo/index.ts "$@"
