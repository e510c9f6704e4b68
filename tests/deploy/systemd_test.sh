#!/usr/bin/env bash
# The systemd unit, checked the way systemd reads it: `systemd-analyze verify` prints nothing
# about it (an unknown key, a bad value or a missing program each print a line), and
# `systemd-analyze security` rates its exposure at most 2.5. A copy with a misspelt key and a
# copy without hardening must both be rejected, so the checks can fail.
# Usage: systemd_test.sh UNIT CAPSWEEPD    (exit 77: skipped, systemd-analyze missing)
set -euo pipefail
unit=$1 daemon=$2
if ! command -v systemd-analyze >/dev/null; then
  echo "SKIP: systemd-analyze is not installed (Debian package systemd)"
  exit 77
fi
units=/usr/lib/systemd/system
[ -d "$units" ] || units=/lib/systemd/system

# A root of our own: the unit, the program it starts and the system's own units (targets).
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/usr/bin" "$root/etc/systemd/system" "$root/usr/lib/systemd"
cp -a "$units" "$root/usr/lib/systemd/system"
cp "$daemon" "$root/usr/bin/capsweepd"
cp "$unit" "$root/etc/systemd/system/capsweepd.service"

# verify NAME: 0 when systemd-analyze verify exits 0 and says nothing.
verify() {
  local out
  out=$(cd "$root" && systemd-analyze verify --man=no --root="$root" "/etc/systemd/system/$1" 2>&1) || {
    echo "$out"
    return 1
  }
  [ -z "$out" ] || {
    echo "$out"
    return 1
  }
}

# exposure NAME: the overall exposure level systemd-analyze security gives it.
exposure() {
  systemd-analyze security --offline=true --root="$root" "/etc/systemd/system/$1" 2>/dev/null |
    sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p'
}

verify capsweepd.service || {
  echo "FAIL: systemd-analyze verify reports the unit above"
  exit 1
}
echo "verify: clean"

score=$(exposure capsweepd.service)
[ -n "$score" ] || {
  echo "FAIL: no exposure level from systemd-analyze security"
  exit 1
}
echo "security: exposure level $score (at most 2.5 wanted)"
awk -v s="$score" 'BEGIN { exit !(s <= 2.5) }' || {
  echo "FAIL: exposure $score > 2.5"
  exit 1
}

# The checks can fail: a misspelt key, and the unit stripped of its hardening.
sed 's/^NoNewPrivileges=/NoNewPrivilege=/' "$unit" >"$root/etc/systemd/system/misspelt.service"
if verify misspelt.service >/dev/null; then
  echo "FAIL: verify accepted a misspelt key"
  exit 1
fi
grep -v -E '^(Protect|Private|Restrict|NoNewPrivileges|SystemCall|Capability|Ambient|Lock|Memory|Remove|Keyring|Device|Proc|UMask)' \
  "$unit" >"$root/etc/systemd/system/bare.service"
bare=$(exposure bare.service)
awk -v s="$bare" 'BEGIN { exit !(s > 2.5) }' || {
  echo "FAIL: the unit without hardening still scored $bare"
  exit 1
}
echo "the same checks reject a misspelt key and the unhardened unit (exposure $bare)"
