# The experiments library, and the built `mlsim` for the command-level tests.
set(MLSIM_TEST_LIBS mlsim_experiments)
set(MLSIM_TEST_DEPENDS mlsim)
