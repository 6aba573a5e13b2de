# AutoPipe's planners on the shipped profiles: the dynamic program against the branch and bound
# (bench/pipeline_planners_bench.cpp, docs/pipeline.md).
add_executable(mlsim_bench_pipeline_planners ${CMAKE_CURRENT_LIST_DIR}/pipeline_planners_bench.cpp)
target_link_libraries(mlsim_bench_pipeline_planners PRIVATE mlsim_pipeline benchmark::benchmark benchmark::benchmark_main)
target_compile_definitions(mlsim_bench_pipeline_planners PRIVATE MLSIM_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
mlsim_warnings(mlsim_bench_pipeline_planners)
