#!/usr/bin/env bash
# Installs Debian's headless-capable Chromium for the dashboard's browser
# test (internal/cli/ui_browser_test.go) when it is missing. The test finds
# it on PATH as chromium; without it the test skips unless
# DEVLOOP_REQUIRE_CHROMIUM is set.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
	exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "chromium.sh: no chromium and no apt-get: install Chromium yourself for the dashboard's browser test" >&2
	exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
	SUDO="sudo"
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium
