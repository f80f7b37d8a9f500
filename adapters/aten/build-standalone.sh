#!/usr/bin/env bash
# Builds the ATen adapter against the libtorch of a Python installation of PyTorch (pip's torch
# 2.x, CPU or CUDA), without CMake or any other opconform dependency: for a machine that has
# PyTorch but not opconform's build (the GPU machine of docs/aten-differences.md's 2.11 column).
#
#   adapters/aten/build-standalone.sh OUT.so [DLPACK_INCLUDE_DIR]
#
# The plugin links libtorch_cuda (when torch has CUDA) so that ATen's CUDA kernels are registered,
# and keeps torch's library folder in its RUNPATH. The same sources build against Debian's
# libtorch 1.13 through CMake (Note [One bridge for ATen 1.13 and 2.x], torch_bridge.cpp).
set -euo pipefail
out=${1:?usage: build-standalone.sh OUT.so [DLPACK_INCLUDE_DIR]}
here=$(cd "$(dirname "$0")/../.." && pwd)
dlpack=${2:-/usr/include}
[[ -f $dlpack/dlpack/dlpack.h ]] || { echo "build-standalone.sh: no dlpack/dlpack.h under $dlpack" >&2; exit 1; }
python=${PYTHON:-python3}
read -r torch_dir abi has_cuda < <("$python" -c '
import os, torch
print(os.path.dirname(torch.__file__), int(torch._C._GLIBCXX_USE_CXX11_ABI), int(torch.version.cuda is not None))')
includes=$("$python" -c 'from torch.utils import cpp_extension as c; print(" ".join("-I" + p for p in c.include_paths()))')
cuda_libs=()
((has_cuda)) && cuda_libs=(-Wl,--no-as-needed -ltorch_cuda -lc10_cuda -Wl,--as-needed)
objects=()
for source in adapters/torch_common/torch_bridge.cpp adapters/aten/aten_plugin.cpp; do
  object=$(mktemp --suffix=.o)
  objects+=("$object")
  ${CXX:-g++} -std=c++20 -O2 -fPIC -fvisibility=hidden -fvisibility-inlines-hidden -D_GLIBCXX_USE_CXX11_ABI="$abi" \
    $includes -I"$here/adapters/include" -I"$here/core/include" -I"$here/adapters/torch_common" -I"$dlpack" \
    -Wno-deprecated-declarations -c "$here/$source" -o "$object" &
done
wait
${CXX:-g++} -shared -o "$out" "${objects[@]}" -L"$torch_dir/lib" "${cuda_libs[@]}" -ltorch_cpu -lc10 \
  -Wl,-rpath,"$torch_dir/lib"
rm -f "${objects[@]}"
echo "built $out against torch in $torch_dir (CXX11 ABI $abi, CUDA $has_cuda)"
