#!/usr/bin/env bash
# Fails when a C++ source differs from what .clang-format asks for; prints the first
# differences. Fix with: deploy/check-format.sh --fix
set -euo pipefail
cd "$(dirname "$0")/.."
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files '*.cpp' '*.hpp')
else
  mapfile -t files < <(find client service tests -name '*.cpp' -o -name '*.hpp')
fi
if [ "${1:-}" = "--fix" ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
if ! out=$(clang-format --dry-run --Werror "${files[@]}" 2>&1); then
  echo "$out" | head -40 >&2
  echo "format: $(echo "$out" | grep -c 'error:') line(s) differ from .clang-format; run deploy/check-format.sh --fix" >&2
  exit 1
fi
echo "format: ${#files[@]} files match .clang-format"
