# tests/dist/module.mk — the programs of the bundle's proofs (tests/dist, run by `make dist-test`).
# own_libs: a program with its own (fake) libzstd and libunwind beside it, found through its RPATH.
DIST_TEST_DIR := $(BUILD)/tests/dist
$(DIST_TEST_DIR)/libzstd.so.1: tests/dist/programs/fake_zstd.c
	@mkdir -p $(@D)
	$(CC) -std=c11 -Wall -Wextra -fPIC -shared -Wl,-soname,libzstd.so.1 $< -o $@
$(DIST_TEST_DIR)/libunwind.so.8: tests/dist/programs/fake_unwind.c
	@mkdir -p $(@D)
	$(CC) -std=c11 -Wall -Wextra -fPIC -shared -Wl,-soname,libunwind.so.8 $< -o $@
$(DIST_TEST_DIR)/libunwind_plugin.so: tests/dist/programs/unwind_plugin.c $(DIST_TEST_DIR)/libunwind.so.8
	$(CC) -std=c11 -Wall -Wextra -fPIC -shared $< -o $@ -L$(DIST_TEST_DIR) -l:libunwind.so.8 -Wl,-rpath,'$$ORIGIN'
$(DIST_TEST_DIR)/own_libs: tests/dist/programs/own_libs.c $(DIST_TEST_DIR)/libzstd.so.1 $(SIM_RUNTIME)
	$(CC) -std=gnu11 -Wall -Wextra -O0 -g -fno-omit-frame-pointer -isystem $(CUDA_HOME)/include $< -o $@ \
	  -L$(DIST_TEST_DIR) -l:libzstd.so.1 -L$(SIM_DIR) -lcudart -ldl -Wl,-rpath,'$$ORIGIN:$$ORIGIN/../../sim'
DIST_TEST_PROGRAMS := $(DIST_TEST_DIR)/own_libs $(DIST_TEST_DIR)/libunwind_plugin.so
