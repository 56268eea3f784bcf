#!/usr/bin/env bash
# Install Debian's chromium when it is missing: the status page's browser tests drive it
# headless through Playwright (Playwright's own browser download is not used).
# SJF_TEST_CHROMIUM names another chromium binary (the tests read the same setting).
exec bash "$(dirname "$0")/ensure_deb.sh" "${SJF_TEST_CHROMIUM:-/usr/bin/chromium}" chromium "the status page's browser tests"
