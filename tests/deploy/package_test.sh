#!/usr/bin/env bash
# The Debian package, end to end in a fresh Debian 12 root: debootstrap (minbase; the base
# tarball is cached between runs), `apt-get install` of the package with its dependencies,
# capsweepd started as the package's `capsweep` user with the packaged settings, a short check
# job against the packaged capsweep-llmsim (a network namespace of its own: loopback only),
# SIGTERM, then `apt-get purge`, after which no file of the package is left, only the kept
# database.
# Usage: package_test.sh BUILD_DIR     (exit 77: skipped, debootstrap cannot run here)
set -euo pipefail
build=$(cd "$1" && pwd)
skip() {
  echo "SKIP: $*"
  exit 77
}
[ "$(id -u)" -eq 0 ] || skip "needs root (debootstrap, chroot and namespaces)"
command -v debootstrap >/dev/null || skip "debootstrap is not installed"
command -v unshare >/dev/null && command -v ip >/dev/null || skip "unshare or ip missing"

echo "== building the package"
cmake --build "$build" --target package >/dev/null
deb=$(ls -t "$build"/capsweep_*.deb | head -1)
echo "$deb"

cache=${CAPSWEEP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/capsweep}
mirror=${CAPSWEEP_DEBIAN_MIRROR:-http://deb.debian.org/debian}
base="$cache/debootstrap-bookworm-minbase-$(dpkg --print-architecture).tgz"
mkdir -p "$cache"
if [ ! -s "$base" ]; then
  echo "== fetching the Debian 12 base (cached in $base)"
  debootstrap --variant=minbase --make-tarball="$base.part" bookworm "$(mktemp -d)" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
    skip "debootstrap could not fetch bookworm from $mirror (see $cache/debootstrap.log)"
  mv "$base.part" "$base"
fi

work=$(mktemp -d "$build/deb-root.XXXXXX")
root="$work/root"
cleanup() {
  umount -R "$root/proc" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
echo "== debootstrap into $root"
debootstrap --variant=minbase --unpack-tarball="$base" bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 || {
  tail -20 "$work/debootstrap.log"
  echo "FAIL: debootstrap from the cached base"
  exit 1
}
cp /etc/resolv.conf "$root/etc/resolv.conf"
cp "$deb" "$root/tmp/capsweep.deb"

# in_root CMD...: runs CMD in the root with its own /proc (a mount namespace of its own).
in_root() {
  unshare --mount --fork -- sh -c 'mount -t proc proc "$0/proc" && exec chroot "$0" "$@"' "$root" "$@"
}

echo "== apt-get install ./capsweep.deb"
in_root apt-get update -q >"$work/apt.log" 2>&1 || {
  tail -20 "$work/apt.log"
  skip "apt-get update in the new root failed (no mirror reachable?)"
}
in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends /tmp/capsweep.deb \
  >>"$work/apt.log" 2>&1 || {
  tail -30 "$work/apt.log"
  echo "FAIL: the package did not install"
  exit 1
}
uid=$(in_root id -u capsweep) || {
  echo "FAIL: postinst made no capsweep user"
  exit 1
}
# Owners as numbers: the names are the root's, not this machine's.
[ "$(stat -c '%u %a' "$root/var/lib/capsweep")" = "$uid 700" ] || {
  echo "FAIL: /var/lib/capsweep is $(stat -c '%u %a' "$root/var/lib/capsweep"), wanted '$uid 700'"
  exit 1
}
echo "installed: $(in_root dpkg-query -W capsweep)"

cat >"$root/tmp/check.json" <<'JSON'
{"name": "package smoke check", "kind": "check",
 "target": {"base_url": "http://127.0.0.1:8000", "api": "completions", "model": "sim-8b",
            "metrics_url": "http://127.0.0.1:8000/metrics"},
 "workload": {"prompt_tokens": {"dist": "fixed", "value": 100},
              "output_tokens": {"dist": "fixed", "value": 16}, "seed": 1},
 "arrival": {"process": "poisson"},
 "check": {"rate_rps": 10, "duration_s": 10, "warmup_s": 1},
 "slo": {"ttft_ms": {"p95": 2000}, "max_error_rate": 0.01}}
JSON

# Inside a network namespace with only loopback, a PID namespace and the root's own /proc.
cat >"$work/run.sh" <<'RUN'
set -euo pipefail
root=$1
ip link set lo up
chroot "$root" /usr/bin/capsweep-llmsim --listen 127.0.0.1:8000 >"$root/tmp/llmsim.log" 2>&1 &
sim=$!
chroot --userspec=capsweep:capsweep "$root" /usr/bin/capsweepd --config /etc/capsweep/capsweepd.json \
  >"$root/tmp/capsweepd.log" 2>&1 &
daemon=$!
for _ in $(seq 100); do
  curl -fsS -o /dev/null http://127.0.0.1:8080/readyz 2>/dev/null && curl -fsS -o /dev/null http://127.0.0.1:8000/health 2>/dev/null && break
  sleep 0.1
done
curl -fsS http://127.0.0.1:8080/readyz
echo
status=0
chroot "$root" /usr/bin/capsweep --server http://127.0.0.1:8080 check /tmp/check.json || status=$?
kill -TERM "$daemon"
daemon_rc=0
wait "$daemon" || daemon_rc=$?
kill -TERM "$sim" || true
wait "$sim" || true
echo "check exit $status, capsweepd exit $daemon_rc after SIGTERM"
[ "$status" -eq 0 ] && [ "$daemon_rc" -eq 0 ]
RUN
echo "== capsweepd and capsweep-llmsim from the package, a check job"
unshare --net --mount --pid --fork --mount-proc="$root/proc" bash "$work/run.sh" "$root" || {
  echo "--- capsweepd log"
  cat "$root/tmp/capsweepd.log" || true
  echo "FAIL: the check job in the installed root"
  exit 1
}
grep -q "listening on 127.0.0.1:8080" "$root/tmp/capsweepd.log" || {
  cat "$root/tmp/capsweepd.log"
  echo "FAIL: capsweepd did not log that it listened"
  exit 1
}
db_mode=$(stat -c '%u %a' "$root/var/lib/capsweep/capsweep.db")
[ "$db_mode" = "$uid 600" ] || {
  echo "FAIL: the database is $db_mode, wanted '$uid 600' (the capsweep user)"
  exit 1
}
echo "database: /var/lib/capsweep/capsweep.db ($db_mode)"

echo "== apt-get purge capsweep"
in_root env DEBIAN_FRONTEND=noninteractive apt-get purge -y -q capsweep >>"$work/apt.log" 2>&1 || {
  tail -20 "$work/apt.log"
  echo "FAIL: purge"
  exit 1
}
left=0
while read -r path; do
  if [ -e "$root/$path" ] && [ ! -d "$root/$path" ]; then
    echo "left behind: $path"
    left=1
  fi
done < <(dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|')
[ ! -e "$root/etc/capsweep" ] || {
  echo "left behind: /etc/capsweep"
  left=1
}
kept=$(cd "$root/var/lib/capsweep" && ls -A)
[ "$kept" = "capsweep.db" ] || {
  echo "left behind in /var/lib/capsweep: $kept"
  left=1
}
[ "$left" -eq 0 ] || {
  echo "FAIL: purge left files"
  exit 1
}
echo "purged: no file of the package left; the database was kept"
echo "PASS"
