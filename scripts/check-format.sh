#!/usr/bin/env bash
# Fails, naming each file, if clang-format (with the committed .clang-format) would change a C++
# file tracked by git.   scripts/check-format.sh --fix   formats them instead.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cpp' '*.hpp')
if [[ "${1:-}" == "--fix" ]]; then
  clang-format -i "${files[@]}"
  exit 0
fi
unformatted=()
for file in "${files[@]}"; do
  clang-format --dry-run --Werror "$file" >/dev/null 2>&1 || unformatted+=("$file")
done
if ((${#unformatted[@]})); then
  printf 'not formatted: %s\n' "${unformatted[@]}"
  echo "check-format: ${#unformatted[@]} of ${#files[@]} files; run scripts/check-format.sh --fix"
  exit 1
fi
echo "check-format: all ${#files[@]} C++ files are formatted"
