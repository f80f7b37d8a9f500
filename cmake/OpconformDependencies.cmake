# Every dependency comes from a Debian package (scripts/install-deps.sh); nothing is downloaded.
# Versions are not requested for dlpack and rapidcheck: their package configs misreport them.
find_package(Threads REQUIRED)
find_package(dlpack CONFIG REQUIRED)
find_package(fmt CONFIG REQUIRED)

if(OPCONFORM_BUILD_TESTS)
  find_package(GTest REQUIRED)
  # Debian's librapidcheck.a is not position-independent: link it into executables only.
  find_package(rapidcheck CONFIG REQUIRED)
  # The reference's OpInfo replay reads its gzip corpus (reference/tests/data).
  find_package(ZLIB REQUIRED)
endif()
if(OPCONFORM_BUILD_BENCH)
  find_package(benchmark CONFIG REQUIRED)
endif()

set(OPCONFORM_HAVE_TORCH OFF)
if(NOT OPCONFORM_TORCH STREQUAL "OFF")
  # libtorch's config pulls in Caffe2 and, with it, CUDA detection of its own: ask quietly.
  find_package(Torch CONFIG QUIET)
  if(Torch_FOUND)
    set(OPCONFORM_HAVE_TORCH ON)
  elseif(OPCONFORM_TORCH STREQUAL "ON")
    message(FATAL_ERROR "OPCONFORM_TORCH=ON but libtorch was not found (install libtorch-dev)")
  endif()
endif()
message(STATUS "opconform: libtorch ${OPCONFORM_HAVE_TORCH}")

# The workers' system-call filter (harness/src/worker_sandbox.cpp); without it that layer is off
# and the run says so.
find_library(OPCONFORM_SECCOMP_LIBRARY seccomp)
find_path(OPCONFORM_SECCOMP_INCLUDE seccomp.h)
if(OPCONFORM_SECCOMP_LIBRARY AND OPCONFORM_SECCOMP_INCLUDE)
  set(OPCONFORM_HAVE_SECCOMP ON)
else()
  set(OPCONFORM_HAVE_SECCOMP OFF)
endif()
message(STATUS "opconform: libseccomp ${OPCONFORM_HAVE_SECCOMP}")

# The report writers (JSON) and the command-line program.
find_package(nlohmann_json CONFIG REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
