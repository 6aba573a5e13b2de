# Many concurrent flows sharing links: the flow backend against SimGrid LV08 in one binary.
if(MLSIM_WITH_SIMGRID)
  add_executable(mlsim_bench_network network_bench.cpp)
  target_link_libraries(mlsim_bench_network PRIVATE mlsim_core mlsim_simgrid benchmark::benchmark)
  mlsim_warnings(mlsim_bench_network)
endif()
