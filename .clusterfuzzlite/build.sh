#!/bin/bash -eu
# Builds opconform's libFuzzer targets (fuzz/) the way OSS-Fuzz and ClusterFuzzLite do: compilers
# and flags from $CC, $CXX, $CFLAGS, $CXXFLAGS, the engine from $LIB_FUZZING_ENGINE, everything
# for the fuzzing infrastructure in $OUT:
#   <name>_fuzz                   the target
#   <name>_fuzz_seed_corpus.zip   fuzz/corpus/<name>/ and the kept reproducers, fuzz/regressions/<name>/
#   <name>_fuzz.dict              fuzz/<name>.dict, where there is one
#   <name>_fuzz.options           libFuzzer's options for it (its dictionary, the time-out)
# Objects go to $WORK/opconform-build, which a later run reuses. Run locally (fuzz/clusterfuzzlite_test.sh):
#   CC=clang-14 CXX=clang++-14 LIB_FUZZING_ENGINE=-fsanitize=fuzzer OUT=/tmp/out WORK=/tmp/work .clusterfuzzlite/build.sh
# OPCONFORM_FUZZ_TARGETS="schema dlpack" builds only those.
set -euo pipefail  # also when run as `bash build.sh`, which ignores the #! line's flags

# The repository: this script's parent folder in a checkout; in the image, where the Dockerfile
# copies it to $SRC/build.sh, the working directory ($SRC/opconform, the Dockerfile's WORKDIR).
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [[ "$(basename "$here")" == .clusterfuzzlite ]]; then repo="$(dirname "$here")"; else repo="$PWD"; fi
: "${CC:=clang}" "${CXX:=clang++}" "${LIB_FUZZING_ENGINE:=-fsanitize=fuzzer}"
: "${OUT:?set OUT: where the targets go}"
: "${WORK:=${OUT}/.work}"
# OSS-Fuzz always sets the flags (the sanitizer of the build, coverage instrumentation); a local
# run gets those of its ASan build.
: "${CFLAGS:=-O1 -fno-omit-frame-pointer -gline-tables-only -fsanitize=address,undefined -fsanitize-address-use-after-scope -fsanitize=fuzzer-no-link}"
: "${CXXFLAGS:=${CFLAGS}}"
targets=(${OPCONFORM_FUZZ_TARGETS:-schema infer_schema dlpack plugin_value report_json differential})

# Libraries the image built from source for this toolchain ($CXXFLAGS may say -stdlib=libc++,
# which the distribution's C++ libraries were not built for): Dockerfile.
deps="$WORK/deps"
if [[ -d "${SRC:-/nonexistent}/rapidcheck" && ! -f "$deps/lib/librapidcheck.a" ]]; then
  cmake -S "$SRC/rapidcheck" -B "$WORK/rapidcheck-build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" -DCMAKE_CXX_FLAGS="$CXXFLAGS" \
    -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DCMAKE_INSTALL_PREFIX="$deps"
  cmake --build "$WORK/rapidcheck-build" --target install
fi
extra_cxx="" extra_link=""
if [[ -d "$deps/include" ]]; then
  extra_cxx="-I$deps/include" extra_link="-L$deps/lib"
fi

build="$WORK/opconform-build"
# Tests, benchmarks and examples off: only the libraries the targets link are built. No
# OPCONFORM_SANITIZE and no build type: the sanitizers and optimisation come from the flags.
cmake -S "$repo" -B "$build" -G Ninja \
  -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" \
  -DCMAKE_C_FLAGS="$CFLAGS" -DCMAKE_CXX_FLAGS="$CXXFLAGS $extra_cxx" \
  -DCMAKE_EXE_LINKER_FLAGS="$extra_link" -DCMAKE_BUILD_TYPE= \
  -DOPCONFORM_BUILD_FUZZ=ON -DOPCONFORM_FUZZ_ENGINE="$LIB_FUZZING_ENGINE" \
  -DOPCONFORM_BUILD_TESTS=OFF -DOPCONFORM_BUILD_BENCH=OFF -DOPCONFORM_BUILD_EXAMPLES=OFF \
  -DOPCONFORM_CUDA=OFF -DOPCONFORM_TORCH=OFF -DOPCONFORM_SANITIZE= >"$WORK/cmake.log" ||
  { cat "$WORK/cmake.log" >&2; exit 1; }
cmake --build "$build" --target "${targets[@]/%/_fuzz}"

mkdir -p "$OUT"
for t in "${targets[@]}"; do
  cp "$build/fuzz/${t}_fuzz" "$OUT/"
  rm -f "$OUT/${t}_fuzz_seed_corpus.zip"
  seeds=("$repo/fuzz/corpus/$t"/*)
  [[ -d "$repo/fuzz/regressions/$t" ]] && seeds+=("$repo/fuzz/regressions/$t"/*)
  zip -q -j "$OUT/${t}_fuzz_seed_corpus.zip" "${seeds[@]}"
  options="[libfuzzer]"$'\n'"timeout = 25"$'\n'
  if [[ -f "$repo/fuzz/$t.dict" ]]; then
    cp "$repo/fuzz/$t.dict" "$OUT/${t}_fuzz.dict"
    options+="dict = ${t}_fuzz.dict"$'\n'
  fi
  printf '%s' "$options" >"$OUT/${t}_fuzz.options"
done
echo "build.sh: ${#targets[@]} targets in $OUT"
