#!/usr/bin/env bash
# Install redis-server from Debian's packages when it is missing (tests need a real one).
set -euo pipefail
command -v redis-server >/dev/null 2>&1 && exit 0
echo "redis-server not found: installing the Debian package" >&2
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server >/dev/null
