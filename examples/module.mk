# examples/module.mk — the bundled demo workload and `make demo`.
$(BUILD)/examples/train_loop: examples/train_loop.cpp $(SIM_RUNTIME)
	@mkdir -p $(@D)
	$(CXX) -std=c++17 -O1 -g -fno-omit-frame-pointer -fno-inline -Iinclude -isystem $(CUDA_HOME)/include \
	  $< -o $@ -L$(SIM_DIR) -lcudart -ldl
# The docs' checks (tests/docs) run it as the README shows.
TEST_BINS += $(BUILD)/examples/train_loop

## demo: build everything and trace the bundled training-loop example, then print its report
demo: all $(BUILD)/examples/train_loop $(SIM_RUNTIME)
	@examples/run_demo.sh $(BUILD) $(CUDA_HOME)
.PHONY: demo
