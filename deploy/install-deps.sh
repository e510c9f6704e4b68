#!/usr/bin/env bash
# Installs every Debian package capsweep needs to build, test and run.
# Idempotent: packages already present are skipped; quiet unless something fails.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config
  libboost1.81-dev libboost-url1.81-dev libboost-json1.81-dev
  nlohmann-json3-dev libsqlite3-dev sqlite3 libfmt-dev catch2
  libvalijson-dev libre2-dev libssl-dev libcli11-dev libyaml-cpp-dev
  clang libclang-rt-14-dev clang-format
  curl procps wrk python3-aiohttp
  debootstrap systemd iproute2 util-linux
  chromium fonts-dejavu-core prometheus
)

# Node.js runs the Kubernetes schema check of the deploy tests; most machines have it already.
command -v npm >/dev/null || packages+=(nodejs npm)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

# The Kubernetes and KEDA schema packages (versions pinned by the lock file), for the deploy
# tests; installed into tests/deploy/k8s/node_modules (ignored by git).
install_schema_packages() {
  local dir
  dir="$(dirname "$0")/../tests/deploy/k8s"
  [ -d "$dir/node_modules/kubernetes-models" ] && return 0
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null) || {
    echo "install-deps: npm ci in tests/deploy/k8s failed" >&2
    exit 1
  }
}

if [ ${#missing[@]} -eq 0 ]; then
  install_schema_packages
  exit 0
fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo_cmd=(sudo)
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "install-deps: installing ${missing[*]}"
if ! { "${sudo_cmd[@]}" apt-get update -q && \
       DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
  cat "$log" >&2
  echo "install-deps: apt-get failed (see above)" >&2
  exit 1
fi

# The prometheus package is here for promtool (the tests check generated PromQL with it); its
# server is not wanted on a build machine: stop it where the package started it.
if printf '%s\n' "${missing[@]}" | grep -qx prometheus && command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
  "${sudo_cmd[@]}" systemctl disable --now prometheus >/dev/null 2>&1 || true
fi

install_schema_packages
