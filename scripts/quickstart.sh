#!/usr/bin/env bash
# One command from a fresh clone: install graphsvc into .venv, make sure the store exists and
# holds the demo dataset, start the server, and once it answers print a ready-to-run curl
# command for every operation, with credentials that work on the store being served.
#   ./scripts/quickstart.sh                       SQLite under ./data
#   GRAPHSVC_DATABASE_URL=postgresql://... ./scripts/quickstart.sh
#   PORT=8001 ./scripts/quickstart.sh             another port
set -euo pipefail
cd "$(dirname "$0")/.."

export GRAPHSVC_DATA_DIR="${GRAPHSVC_DATA_DIR:-$PWD/data}"
port="${PORT:-8000}"
base="http://127.0.0.1:$port"

if ! python3 -c 'import socket, sys; socket.socket().bind(("127.0.0.1", int(sys.argv[1])))' \
    "$port" 2>/dev/null; then
  store_setting=""
  [ -n "${GRAPHSVC_DATABASE_URL:-}" ] && store_setting="GRAPHSVC_DATABASE_URL=$GRAPHSVC_DATABASE_URL "
  echo "quickstart: port $port is in use; choose another: ${store_setting}PORT=8001 $0" >&2
  exit 1
fi

if [ ! -x .venv/bin/graphsvc ]; then
  echo "quickstart: installing graphsvc into .venv (once)..." >&2
  python3 -m venv .venv && .venv/bin/pip install -q -e .
fi

# Creates the PostgreSQL database when the role may (else says how), and migrates.
.venv/bin/graphsvc db upgrade >&2
# The demo's credentials, for this store: loaded now, or renewed if it was loaded before.
# The file holds the admin secret and token key: private. One file per store, so that a
# PostgreSQL quickstart in the same clone leaves the SQLite store's credentials alone.
if [ -n "${GRAPHSVC_DATABASE_URL:-}" ]; then
  store=$(.venv/bin/python -c 'import re, sys, urllib.parse as u
url = u.urlsplit(sys.argv[1])
kind = url.scheme.split("+")[0]
where = url.path if kind == "sqlite" else f"{url.hostname}-{url.port or 5432}{url.path}"
print(re.sub(r"[^A-Za-z0-9._]+", "-", f"{kind}-{where}").strip("-"))' "$GRAPHSVC_DATABASE_URL")
  demo="$GRAPHSVC_DATA_DIR/demo-$store.json"
else
  demo="$GRAPHSVC_DATA_DIR/demo.json"
fi
mkdir -p "$GRAPHSVC_DATA_DIR"
(umask 077 && .venv/bin/graphsvc demo --json > "$demo.tmp") && mv "$demo.tmp" "$demo"

.venv/bin/graphsvc serve --host 127.0.0.1 --port "$port" &
server=$!
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null' EXIT
trap 'exit 130' INT TERM
for _ in $(seq 1 200); do
  if .venv/bin/python -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=1)' \
      "$base/health" 2>/dev/null; then
    break
  fi
  kill -0 "$server" 2>/dev/null || { echo "quickstart: the server did not start" >&2; exit 1; }
  sleep 0.1
done

.venv/bin/graphsvc examples "$demo" --base-url "$base"
echo
secret=$(.venv/bin/python -c 'import json, sys; print(json.load(open(sys.argv[1]))["admin_secret"])' "$demo")
domain=$(.venv/bin/python -c 'from graphsvc.demo.dataset import DOMAIN_SID; print(DOMAIN_SID)')
echo "# The web console: open $base/ui/ and sign in as admin with the secret $secret"
echo "# A path from the demo's BOB to its Domain Admins: $base/ui/#/paths/$domain-1105/$domain-512"
echo "# The API reference: $base/api/v2/docs"
echo "# From a second terminal, this server for the README's commands, and fresh signed"
echo "# examples:"
if [ -n "${GRAPHSVC_DATABASE_URL:-}" ]; then
  echo "#   export GRAPHSVC_URL=$base GRAPHSVC_DATA_DIR=$GRAPHSVC_DATA_DIR GRAPHSVC_DATABASE_URL=$GRAPHSVC_DATABASE_URL"
  echo "#   (the README's commands read data/demo.json: use $demo for this store)"
else
  echo "#   export GRAPHSVC_URL=$base GRAPHSVC_DATA_DIR=$GRAPHSVC_DATA_DIR"
fi
echo "#   .venv/bin/graphsvc examples $demo"
echo "# Serving on $base (Ctrl-C stops)."
wait "$server"
