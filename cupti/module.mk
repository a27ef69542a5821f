# cupti/module.mk — the CUPTI backend's .cpp files go into build/libgpumemtrace.so through
# interpose/module.mk; here: its unit tests (GoogleTest, hand-built CUPTI buffers, no GPU). The link
# line takes only sources and objects: -MMD makes the headers prerequisites too.

$(BUILD)/tests/unit/cupti_events_test: tests/unit/cupti_events_test.cpp $(BUILD)/cupti/cupti_events.o
	@mkdir -p $(@D)
	$(CXX) $(CPPFLAGS) $(ALL_CXXFLAGS) $(filter %.cpp %.o,$^) -o $@ -lgtest -lgtest_main -pthread

UNIT_TESTS += $(BUILD)/tests/unit/cupti_events_test
