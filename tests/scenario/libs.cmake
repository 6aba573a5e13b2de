# The fuzz corpus replay test loads scenarios with the program's own registry.
set(MLSIM_TEST_LIBS mlsim_registry)
