#!/usr/bin/env bash
# Install the Debian packages nearmem needs, when they are missing.
#
#   scripts/install-deps.sh          build, test and demo dependencies
#   scripts/install-deps.sh --bench  also the peers the benchmarks compare against
#
# Idempotent and quiet when everything is present. As root it installs with
# apt-get; otherwise it names what is missing and exits non-zero.
set -euo pipefail

# One line per package: why it is needed.
core=(
  cmake               # build system
  make
  gcc
  pkg-config          # finds the libraries below
  libcmocka-dev       # unit-test framework
  libxxhash-dev       # PIM-CACHE fingerprints (XXH64, XXH3)
  libstreamvbyte-dev  # PIM-CACHE VByte compression
  libpmem-dev         # PMAlloc flush primitives
  libpmemobj-dev      # PMDK, PMAlloc's peer in tests and benchmarks
  libnuma-dev         # PMAlloc NUMA topology
  python3             # Debian's interpreter for bench/plot.py
  python3-matplotlib  # --plot
  clang-16            # nearmem-dpu-cc: builds DPU programs (plain UPMEM C) to LLVM bitcode
  llvm-16             # opt-16, llvm-link-16, llvm-config-16 for nearmem-dpu-cc
  llvm-16-dev         # headers of the DPU pass plugin (src/pim/dpucc)
  g++                 # compiles the pass plugin (LLVM's API is C++)
  libjson-c-dev       # pim-validate reads the real-hardware reference points (bench/pim/reference)
)
bench=(
  libjemalloc2 libjemalloc-dev  # SpeedMalloc peers, loaded with LD_PRELOAD
  libtcmalloc-minimal4
  libmimalloc2.0
  redis-server redis-tools      # speedmalloc-redis
  sibelia-examples              # pim-cache-genome: related genomes
  valgrind                      # instruction counts
  gdb                           # pmalloc-fences: counts flush/fence instructions on the native path
)

want=("${core[@]}")
if [[ "${1:-}" == "--bench" ]]; then want=("${bench[@]}"); fi

missing=()
for p in "${want[@]}"; do
  # dpkg-query prints "install ok installed" only for a fully installed package.
  if [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" != "install ok installed" ]]; then
    missing+=("$p")
  fi
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

if [[ $(id -u) -ne 0 ]]; then
  echo "nearmem: missing Debian packages: ${missing[*]}" >&2
  echo "nearmem: run as root, or: sudo apt-get install ${missing[*]}" >&2
  exit 1
fi

echo "nearmem: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
# Package lists may be absent on a fresh machine; refresh them once if the install fails.
if ! apt-get install -y -q --no-install-recommends "${missing[@]}" >"$log" 2>&1; then
  apt-get update -q >>"$log" 2>&1 || true
  if ! apt-get install -y -q --no-install-recommends "${missing[@]}" >>"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    echo "nearmem: apt-get could not install: ${missing[*]}" >&2
    exit 1
  fi
fi
rm -f "$log"
