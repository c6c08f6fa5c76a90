#!/usr/bin/env bash
# An UPMEM program tree (dpu/, host/, support/, a Makefile calling
# dpu-upmem-dpurte-clang and dpu-pkg-config) builds and runs with nothing
# changed but PATH: nearmem is installed into a prefix inside the build tree,
# its bin/ goes first in PATH, the tree is copied and built with make, and
# bin/host_code runs.
#   upmem_tree_test.sh <build dir> <tree dir> <name> [host_code args...]
# Passes if the build succeeds and bin/host_code exits 0.
set -euo pipefail
build=$1 tree=$2 name=$3
shift 3
# one directory per run: the whole suite also runs preloaded (speedmalloc_preload_whole_suite)
# beside the plain run, and two runs sharing a directory removed each other's tree
work="$build/upmem-tree/$name.$$"
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
cp -r "$tree" "$work/tree"
export PATH="$work/prefix/bin:$PATH"
cd "$work/tree"
make clean > /dev/null 2>&1 || true
make
./bin/host_code "$@"
