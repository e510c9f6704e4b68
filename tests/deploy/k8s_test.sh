#!/usr/bin/env bash
# The Kubernetes manifests and the autoscaler objects capsweep generates, validated against
# the upstream schemas (kubernetes-models, @kubernetes-models/keda and
# @kubernetes-models/prometheus-operator, pinned in tests/deploy/k8s/package-lock.json and
# installed by deploy/install-deps.sh) with unknown fields refused; the kustomize overlay
# rendered with `kubectl kustomize` where kubectl exists; and broken copies (a misspelt
# field, a wrong type) rejected by the same check, so it can fail.
# Usage: k8s_test.sh SOURCE_DIR AUTOSCALE_EXAMPLES_PROGRAM    (exit 77: skipped, no node)
set -euo pipefail
src=$1 examples=$2
check="$src/tests/deploy/k8s/validate.mjs"
command -v node >/dev/null || {
  echo "SKIP: node is not installed"
  exit 77
}
[ -d "$src/tests/deploy/k8s/node_modules/kubernetes-models" ] || {
  echo "FAIL: the schema packages are not installed: run deploy/install-deps.sh"
  exit 1
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
k8s="$src/deploy/k8s"

echo "== manifests, file by file"
mapfile -t files < <(find "$k8s" -name '*.yaml' ! -name kustomization.yaml | sort)
node "$check" "${files[@]}"

if command -v kubectl >/dev/null; then
  for dir in base llmsim overlays/example; do
    echo "== kubectl kustomize $dir"
    kubectl kustomize "$k8s/$dir" >"$work/rendered.yaml"
    node "$check" "$work/rendered.yaml"
  done
else
  echo "(kubectl not installed: the kustomize overlays were checked file by file only)"
fi

echo "== autoscaler objects from capsweep autoscale"
"$examples" "$work"
node "$check" "$work"/keda-*.yaml "$work"/hpa-*.yaml
echo "== load agents' Indexed Jobs from capsweepd"
node "$check" "$work"/agent-job-*.yaml

echo "== broken copies must be rejected"
reject() { # what file
  if node "$check" "$2" >"$work/out.txt"; then
    cat "$work/out.txt"
    echo "FAIL: the check accepted $1"
    exit 1
  fi
  echo "rejected ($1): $(head -1 "$work/out.txt")"
}
sed 's/^  replicas: 1/  replica: 1/' "$k8s/base/statefulset.yaml" >"$work/misspelt.yaml"
reject "a misspelt field" "$work/misspelt.yaml"
sed 's/readOnlyRootFilesystem: true/readOnlyRootFilesystem: "yes"/' "$k8s/base/statefulset.yaml" >"$work/type.yaml"
reject "a wrong type" "$work/type.yaml"
sed 's/minReplicaCount:/minReplicas:/' "$work/keda-1.yaml" >"$work/keda-bad.yaml"
reject "a ScaledObject with an HPA field name" "$work/keda-bad.yaml"
sed 's/"podReplacementPolicy"/"podReplacementPolicies"/' "$work/agent-job-1.yaml" >"$work/agent-bad.yaml"
reject "an agent Job with a misspelt field" "$work/agent-bad.yaml"
echo "PASS"
