#!/usr/bin/env bash
# Install redis-server from Debian's packages when it is missing (tests need a real one).
exec bash "$(dirname "$0")/ensure_deb.sh" redis-server redis-server "the Redis tests"
