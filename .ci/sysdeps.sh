#!/bin/sh
# Install the Debian/Ubuntu packages named as arguments that are not installed yet.
# Called by `make sysdeps` (the package lists live in the Makefile); `.ci/run` uses that target.
#
#   nothing missing            -> exit 0, print nothing (a second `make run` starts at once)
#   root                       -> apt-get update, then apt-get install of the missing ones
#   passwordless sudo          -> the same through `sudo -n`
#   otherwise                  -> one line with the exact command to run, exit 1
#   no dpkg-query / apt-get    -> one note naming the packages, exit 0 (not Debian: go on)
set -eu

if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
  echo "note: no dpkg/apt-get here; install the equivalents of these Debian packages yourself: $*" >&2
  exit 0
fi

# One dpkg-query for all of them. Ubuntu 24.04 renamed some libraries with a "t64" suffix
# (libglib2.0-0 -> libglib2.0-0t64), so NAMEt64 installed counts as NAME installed.
queries=""
for p in "$@"; do queries="$queries $p ${p}t64"; done
# shellcheck disable=SC2016,SC2086  # ${...} is dpkg-query's format; $queries is split on purpose
installed=$(dpkg-query -W -f='${Package} ${db:Status-Status}\n' $queries 2>/dev/null \
  | awk '$2 == "installed" { sub(/t64$/, "", $1); print $1 }' || true)

missing=""
for p in "$@"; do
  printf '%s\n' "$installed" | grep -qxF -- "$p" || missing="$missing $p"
done
[ -n "$missing" ] || exit 0

if [ "$(id -u)" -eq 0 ]; then
  as_root=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true >/dev/null 2>&1; then
  as_root="sudo -n"
else
  echo "error: missing Debian packages (not root, no passwordless sudo); install them with: sudo apt-get update && sudo apt-get install -y --no-install-recommends$missing" >&2
  exit 1
fi

echo "== installing Debian packages:$missing"
# shellcheck disable=SC2086  # $as_root and $missing are word lists
$as_root apt-get update -q
# shellcheck disable=SC2086
$as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing
