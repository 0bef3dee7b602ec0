#!/usr/bin/env bash
# Installs everything minimodel builds against, from Debian's archive only. Idempotent.
#   scripts/install-deps.sh              build + test dependencies
#   scripts/install-deps.sh --fixtures   also PyTorch + NumPy, for scripts/make_fixtures.py
set -euo pipefail

packages=(
  build-essential cmake pkg-config git
  libxtensor-dev xtl-dev libxtensor-blas-dev libxsimd-dev libopenblas-dev
  libxsmm-dev  # workbench/fast_attention: small-GEMM kernels for the tuned tiles
  libgtest-dev nlohmann-json3-dev libcli11-dev libpugixml-dev clang-format
  clang libclang-rt-14-dev libbenchmark-dev
  libcairo2-dev fonts-dejavu-core
  libpcre2-dev  # lab 12: GPT-2's pre-tokenizer regex, with Unicode classes
  bible-kjv  # lab 12's corpus, the King James Bible (`workbook corpus`)
  ccache  # .ci/run shares objects between its release build and the scratch clone's
  ninja-build  # the maintainers' sanitizer build
  openmpi-bin libopenmpi-dev  # lab 14: mpiexec and MPI's headers and libraries
  libcpp-httplib-dev  # workbook explore --serve
  chromium  # the explorer's browser tests (tests/browser/, driven by puppeteer-core)
  firefox-esr  # the same tests in Firefox (over WebDriver BiDi)
)
# The browser tests' Node.js and npm: Debian's only where none is on PATH already.
command -v node >/dev/null && command -v npm >/dev/null || packages+=(nodejs npm)
[[ "${1:-}" == "--fixtures" ]] && packages+=(python3-torch python3-numpy python3-regex)  # regex: scripts/bench_bpe.py

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages already installed"
  exit 0
fi

sudo=""
((EUID == 0)) || sudo="sudo"
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
