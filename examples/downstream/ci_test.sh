#!/usr/bin/env bash
# The downstream example against an installed opconform, the way a user runs it (the ctest test
# examples_downstream, label downstream, runs this):
#
#   ci_test.sh <opconform build dir> <scratch dir> [cmake options for the downstream project...]
#
# 1. installs the build into <scratch>/staging and moves it to <scratch>/prefix: the package must
#    work wherever it lies, and no text file in it may name the source, build or staging tree;
# 2. configures examples/downstream against it (CMAKE_PREFIX_PATH), builds it, runs its ctest,
#    and checks that `ctest -L conformance` selects the plugin's operators.
# Every step prints its output; the first one that fails fails the script and leaves <scratch>
# as it was.
set -euo pipefail

build=$(cd "$1" && pwd)
scratch=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
source_root=$(cd "$here/../.." && pwd)
jobs=$(nproc)

step() { printf '\n== %s\n' "$*"; }

rm -rf "$scratch"
mkdir -p "$scratch"
scratch=$(cd "$scratch" && pwd)

step "install $build"
if ! cmake --install "$build" --prefix "$scratch/staging"; then
  echo "ci_test.sh: the install failed; build everything first (cmake --build $build)" >&2
  exit 1
fi
mv "$scratch/staging" "$scratch/prefix"

step "no path of the source, build or staging tree in the package's text files"
# -I skips binary files: the static libraries' debug information names their sources, as any does.
if grep -rIlF -e "$source_root" -e "$build" -e "$scratch/staging" "$scratch/prefix"; then
  echo "ci_test.sh: the files above name a path of this machine: the package is not relocatable" >&2
  exit 1
fi

step "configure examples/downstream against $scratch/prefix"
cmake -S "$here" -B "$scratch/build" -DCMAKE_PREFIX_PATH="$scratch/prefix" "$@"

step "build"
cmake --build "$scratch/build" -j "$jobs"

step "ctest"
ctest --test-dir "$scratch/build" --output-on-failure -j "$jobs"

step "ctest -L conformance selects the plugin's operators"
listed=$(ctest --test-dir "$scratch/build" -N -L conformance)
echo "$listed"
for op in aten::relu aten::sigmoid; do
  if ! grep -q "my_plugin/$op\$" <<<"$listed"; then
    echo "ci_test.sh: no conformance test for $op" >&2
    exit 1
  fi
done

step "a plugin built against the C ABI alone needs none of opconform's other dependencies"
cmake -S "$here/abi_only" -B "$scratch/abi_only" -DCMAKE_PREFIX_PATH="$scratch/prefix" \
  -DCMAKE_DISABLE_FIND_PACKAGE_rapidcheck=ON -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_CLI11=ON -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON
cmake --build "$scratch/abi_only" -j "$jobs"

# The installed package is some 400 MB (static libraries with debug information): kept only
# when a step failed, for a look.
rm -rf "$scratch"
