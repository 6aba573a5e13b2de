# All-to-all of 1 MiB per pair on a leaf-spine fabric (up to 1,024 hosts, ~10^6 flows): the flow
# backend, and SimGrid LV08 where built.
if(MLSIM_WITH_SIMGRID)
  add_executable(mlsim_bench_alltoall ${CMAKE_CURRENT_LIST_DIR}/alltoall_bench.cpp)
  target_link_libraries(mlsim_bench_alltoall PRIVATE mlsim_core mlsim_simgrid benchmark::benchmark)
  mlsim_warnings(mlsim_bench_alltoall)
endif()
