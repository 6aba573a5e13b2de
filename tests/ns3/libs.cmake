# Links the ns-3 backend when it is built; without it the tests compile to an empty suite.
if(TARGET mlsim_ns3)
  set(MLSIM_TEST_LIBS mlsim_ns3)
endif()
