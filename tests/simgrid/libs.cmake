# Links the SimGrid backend when it is built; without it the tests compile to an empty suite.
if(TARGET mlsim_simgrid)
  set(MLSIM_TEST_LIBS mlsim_simgrid)
endif()
