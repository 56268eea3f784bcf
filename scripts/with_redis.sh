#!/usr/bin/env bash
# Run a command beside a throw-away redis-server on a free 127.0.0.1 port, without
# persistence. The URL is exported as SJF_TEST_REDIS_URL; the server is stopped by PID.
set -euo pipefail
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
dir=$(mktemp -d)
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" --daemonize no >"$dir/redis.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 1 50); do
  redis-cli -p "$port" ping >/dev/null 2>&1 && break
  sleep 0.1
done
export SJF_TEST_REDIS_URL="redis://127.0.0.1:$port/0"
"$@"
