#!/usr/bin/env bash
# Usage: ensure_deb.sh PROGRAM PACKAGE [WHAT]
# Install Debian's PACKAGE when PROGRAM (a command name or an absolute path) is missing: the
# tests use real programs (redis-server, a headless chromium), and `make test` must pass on a
# fresh machine. apt-get as root, through sudo otherwise; when neither works, one clear line
# saying what to install and why, and exit status 1.
set -euo pipefail
program=$1; package=$2; what=${3:-the tests}
present() { if [[ $program == /* ]]; then [ -x "$program" ]; else command -v "$program" >/dev/null 2>&1; fi; }
present && exit 0
fail() {
  echo "make test: $program is missing and $1; install Debian's '$package' package" \
       "(apt-get install -y $package) as root, then run make test again (needed by $what)" >&2
  exit 1
}
command -v apt-get >/dev/null 2>&1 || fail "there is no apt-get on this machine"
if [ "$(id -u)" -eq 0 ]; then SUDO=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO=(sudo -n)
else fail "installing it needs root (not root, and no password-less sudo)"
fi
echo "$program not found: installing Debian's $package package for $what" >&2
"${SUDO[@]}" apt-get update -qq || fail "apt-get update failed"
DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq "$package" >/dev/null \
  || fail "apt-get install -y $package failed"
present || fail "the $package package did not provide it"
