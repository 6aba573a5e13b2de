# The CLI tests run the built `mlsim` program and load scenarios with its registry.
set(MLSIM_TEST_LIBS mlsim_commands)
set(MLSIM_TEST_DEPENDS mlsim)
