# Strict JSON reading from 1 to 64 MiB (bench/strict_json_bench.cpp).
add_executable(mlsim_bench_strict_json ${CMAKE_CURRENT_LIST_DIR}/strict_json_bench.cpp)
target_link_libraries(mlsim_bench_strict_json PRIVATE mlsim_core benchmark::benchmark benchmark::benchmark_main)
mlsim_warnings(mlsim_bench_strict_json)
