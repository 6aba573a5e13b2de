set(MLSIM_TEST_LIBS mlsim_training)
