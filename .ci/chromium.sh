#!/usr/bin/env bash
# Debian's chromium for the HTML report's browser tests (headless), installed with apt when missing.
set -euo pipefail
command -v chromium >/dev/null 2>&1 && exit 0
SUDO=$([ "$(id -u)" -eq 0 ] && echo "" || echo "sudo")
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
