# interpose/module.mk — build/libgpumemtrace.so: hooks -> recorder -> writer, preloaded into programs.
# Every .cpp under interpose/ and cupti/ goes in, so new hooks need no Makefile change.
# It links no CUDA library (no NEEDED libcudart/libcuda/libcupti): CUDA is found at run time.

GPUMEMTRACE_VERSION := 0.1.0
LIB_SRCS := $(sort $(shell find interpose cupti -name '*.cpp' -not -path '*/test*') trace/json_line.cpp \
  trace/dwarf_symbols.cpp)
LIB_OBJS := $(LIB_SRCS:%.cpp=$(BUILD)/%.o)
LIB_LDLIBS := -lunwind -ldw -lelf -lzstd -ldl -lpthread

$(LIB_OBJS): CPPFLAGS += -DGPUMEMTRACE_VERSION='"$(GPUMEMTRACE_VERSION)"'
# Our own frames (hook -> record -> capture) keep rbp as a frame pointer, so that the frame-pointer
# walk of interpose/recorder/unwind.cpp passes through them to the program's frames.
$(LIB_OBJS): ALL_CXXFLAGS += -fno-omit-frame-pointer
# GCC zeroes a hook's EventFacts (about 200 bytes) with `rep stos`, whose start-up the hook thread paid
# on every event (about 10% of its time on AMD EPYC): vector stores up to 256 bytes, memset() above.
# GCC only; another compiler goes without.
LIB_MEMSET_STRATEGY := $(shell $(CXX) -mmemset-strategy=vector_loop:256:noalign,libcall:-1:noalign -x c++ \
  -fsyntax-only /dev/null 2>/dev/null && echo -mmemset-strategy=vector_loop:256:noalign,libcall:-1:noalign)
$(LIB_OBJS): ALL_CXXFLAGS += $(LIB_MEMSET_STRATEGY)

# It exports only the functions it interposes and its public C API (packaging/libgpumemtrace.map):
# the libstdc++ linked into it stays out of the program's symbol lookup. -z nodelete: never unloaded,
# even where a dlopen (NVTX's or CUPTI's injection) is followed by dlclose; its hooks and threads
# may still be in use, its on_exit handler (the footer's exit status) stays registered, and its
# static libstdc++'s emergency exception pool is never freed. (Exported, libstdc++'s GNU_UNIQUE
# symbols used to pin it in memory implicitly.)
LIB_EXPORTS := packaging/libgpumemtrace.map
LIB_EXPORT_FLAGS := -Wl,--version-script=$(LIB_EXPORTS) -Wl,--exclude-libs,ALL -Wl,-z,nodelete
$(BUILD)/libgpumemtrace.so: $(LIB_OBJS) $(LIB_EXPORTS)
	@mkdir -p $(@D)
	$(CXX) -shared -o $@ $(LIB_OBJS) -Wl,-z,defs -Wl,--no-undefined $(LIB_EXPORT_FLAGS) -static-libstdc++ \
	  -static-libgcc $(LIB_LDLIBS)

LIBS += $(BUILD)/libgpumemtrace.so
