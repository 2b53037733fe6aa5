#!/usr/bin/env bash
# One command from a fresh clone: install graphsvc into .venv, load the demo dataset into the
# embedded SQLite store (once), print ready-to-run curl commands, and serve on port 8000.
set -euo pipefail
cd "$(dirname "$0")/.."

export GRAPHSVC_DATA_DIR="${GRAPHSVC_DATA_DIR:-$PWD/data}"
port="${PORT:-8000}"

[ -x .venv/bin/graphsvc ] || { python3 -m venv .venv && .venv/bin/pip install -q -e .; }
mkdir -p "$GRAPHSVC_DATA_DIR"
demo="$GRAPHSVC_DATA_DIR/demo.json"
if [ ! -s "$demo" ]; then
  # The demo output holds the admin secret and token key: keep it private.
  (umask 077 && .venv/bin/graphsvc demo --json > "$demo.tmp") && mv "$demo.tmp" "$demo"
fi
.venv/bin/graphsvc examples "$demo" --base-url "http://127.0.0.1:$port"
echo
echo "# Serving on http://127.0.0.1:$port (Ctrl-C stops). Fresh signed examples:"
echo "#   .venv/bin/graphsvc examples $demo"
exec .venv/bin/graphsvc serve --host 127.0.0.1 --port "$port"
