# Serving model speed on the whole Azure conversation trace (bench/serving_bench.cpp).
add_executable(mlsim_bench_serving ${CMAKE_CURRENT_LIST_DIR}/serving_bench.cpp)
target_link_libraries(mlsim_bench_serving PRIVATE mlsim_registry benchmark::benchmark benchmark::benchmark_main)
target_compile_definitions(mlsim_bench_serving PRIVATE MLSIM_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
mlsim_warnings(mlsim_bench_serving)
