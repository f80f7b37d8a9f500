# Included by each libtorch-based plugin's CMakeLists.txt: adds adapters/torch_common once.
include_guard(GLOBAL)
add_subdirectory(${CMAKE_CURRENT_LIST_DIR} ${PROJECT_BINARY_DIR}/adapters/torch_common)
