# packaging/module.mk — installing gpumemtrace (docs/install.md):
#   make dist        dist/gpumemtrace-VERSION-linux-x86_64.tar.gz: the relocatable release bundle
#   make wheel       dist/gpumemtrace-VERSION-py3-none-manylinux_2_34_x86_64.whl: the same files as a wheel
#   make install     the build tree's programs into PREFIX (default /usr/local; PREFIX=~/.local: no root)
#   make gpu-bundle  dist/gpu/: the unpacked bundle and the GPU check programs, for a lent GPU machine
#   make dist-test   the proofs (tests/dist): every ELF file, a minimal root, a venv; .ci/run runs it
#
# The bundle's three ELF files are linked from the same objects as build/'s, differently: libstdc++,
# libgcc and every library but glibc go in statically (position-independent archives that
# packaging/third_party.sh builds from Debian's sources into $(THIRD_PARTY), once, with the network),
# with every symbol of theirs local; the two glibc functions newer than the baseline that GCC's runtime
# calls are wrapped (packaging/glibc_compat.c); debug info is stripped. packaging/elfcheck.py then
# refuses a bundle whose files need more than glibc $(DIST_GLIBC_MAX).

DIST         ?= dist
THIRD_PARTY  ?= build-deps
PREFIX       ?= /usr/local
DIST_NAME    := gpumemtrace-$(GPUMEMTRACE_VERSION)-linux-x86_64
DIST_TARBALL := $(DIST)/$(DIST_NAME).tar.gz
DIST_WHEEL   := $(DIST)/gpumemtrace-$(GPUMEMTRACE_VERSION)-py3-none-manylinux_2_34_x86_64.whl
DIST_BUILD   := $(BUILD)/dist
DIST_TREE    := $(DIST_BUILD)/$(DIST_NAME)
DIST_GLIBC_MAX := 2.34
PIC_STAMP    := $(THIRD_PARTY)/pic/.built

# ---- the statically linked programs and library ----
DIST_COMPAT_OBJ := $(BUILD)/packaging/glibc_compat.o
DIST_LDFLAGS := -static-libstdc++ -static-libgcc -L$(THIRD_PARTY)/pic/lib \
  -Wl,--wrap=_dl_find_object -Wl,--wrap=arc4random
# -Bstatic: the archives, never a shared copy; $(THIRD_PARTY)/pic/lib comes first in the search.
dist_static = -Wl,-Bstatic $(1) -Wl,-Bdynamic -ldl -lpthread

## dist-deps: fetch Debian's sources once and build the bundle's static archives (build-deps/; needs the network)
$(PIC_STAMP): packaging/third_party.sh
	rm -f $@
	CXX="$(CXX)" packaging/third_party.sh $(THIRD_PARTY)
dist-deps: $(PIC_STAMP)

$(DIST_BUILD)/libgpumemtrace.so: $(LIB_OBJS) $(DIST_COMPAT_OBJ) $(LIB_EXPORTS) $(PIC_STAMP)
	@mkdir -p $(@D)
	$(CXX) -shared -o $@ $(LIB_OBJS) $(DIST_COMPAT_OBJ) -Wl,-z,defs -Wl,--no-undefined $(LIB_EXPORT_FLAGS) \
	  $(DIST_LDFLAGS) $(call dist_static,-lunwind -ldw -lelf -lzstd -lz)
$(DIST_BUILD)/gpumem-report: $(BUILD)/report/main.o $(REPORT_LIB) $(DIST_COMPAT_OBJ) $(PIC_STAMP)
	@mkdir -p $(@D)
	$(CXX) -o $@ $(BUILD)/report/main.o $(REPORT_LIB) $(DIST_COMPAT_OBJ) $(DIST_LDFLAGS) \
	  $(call dist_static,-lsimdjson -lzstd -ldw -lelf -lz)
$(DIST_BUILD)/gpumemtrace: $(LAUNCHER_OBJS) $(REPORT_LIB) $(DIST_COMPAT_OBJ) $(PIC_STAMP)
	@mkdir -p $(@D)
	$(CXX) -o $@ $(LAUNCHER_OBJS) $(REPORT_LIB) $(DIST_COMPAT_OBJ) $(DIST_LDFLAGS) \
	  $(call dist_static,-lsimdjson -lzstd -ldw -lelf -lz)

# ---- the bundle tree, its tarball and the wheel ----
DIST_ELF := $(DIST_BUILD)/gpumemtrace $(DIST_BUILD)/gpumem-report $(DIST_BUILD)/libgpumemtrace.so
DIST_PYTHON := $(sort $(shell find tools/python -name '*.py' -not -path '*/__pycache__/*'))
DIST_DOCS := README.md $(wildcard docs/*.md docs/images/*)
DIST_TREE_STAMP := $(DIST_BUILD)/tree.stamp

$(DIST_TREE_STAMP): $(DIST_ELF) $(DIST_PYTHON) $(DIST_DOCS) include/gpumemtrace.h packaging/bundle.py \
                    packaging/elfcheck.py
	$(PYTHON) packaging/bundle.py tree $(DIST_TREE) --bin $(DIST_BUILD)/gpumemtrace $(DIST_BUILD)/gpumem-report \
	  --lib $(DIST_BUILD)/libgpumemtrace.so --python tools/python --include include/gpumemtrace.h \
	  --doc $(DIST_DOCS) --third-party $(THIRD_PARTY)/pic
	$(PYTHON) packaging/elfcheck.py --glibc-max $(DIST_GLIBC_MAX) --preload lib/libgpumemtrace.so $(DIST_TREE)
	touch $@

$(DIST_TARBALL): $(DIST_TREE_STAMP)
	@mkdir -p $(@D)
	$(PYTHON) packaging/bundle.py tarball $(DIST_TREE) $@

$(DIST_WHEEL): $(DIST_TREE_STAMP) packaging/wheel.py
	@mkdir -p $(@D)
	$(PYTHON) packaging/wheel.py $(DIST_TREE) $@ --version $(GPUMEMTRACE_VERSION) --readme README.md

## dist: the relocatable release tarball, dist/gpumemtrace-VERSION-linux-x86_64.tar.gz (docs/install.md)
dist: $(DIST_TARBALL)
## wheel: the Python wheel, dist/gpumemtrace-VERSION-py3-none-manylinux_2_34_x86_64.whl (pip install it)
wheel: $(DIST_WHEEL)

# ---- make install: the build tree's own programs (linked against this machine's libraries) ----
# A leading ~ is the home directory even where the shell left it alone (PREFIX=~/.local under sh).
INSTALL_PREFIX = $(DESTDIR)$(patsubst ~%,$(HOME)%,$(PREFIX))
INSTALLED_PYTHON := $(patsubst tools/python/%,%,$(DIST_PYTHON))

## install: install the launcher, gpumem-report, the recorder and the Python helpers into PREFIX (default /usr/local)
install: all
	install -d $(INSTALL_PREFIX)/bin $(INSTALL_PREFIX)/lib $(INSTALL_PREFIX)/include \
	  $(INSTALL_PREFIX)/share/gpumemtrace/python $(INSTALL_PREFIX)/share/doc/gpumemtrace
	install -m 755 $(BUILD)/gpumemtrace $(BUILD)/gpumem-report $(INSTALL_PREFIX)/bin/
	install -m 644 $(BUILD)/libgpumemtrace.so $(INSTALL_PREFIX)/lib/
	install -m 644 include/gpumemtrace.h $(INSTALL_PREFIX)/include/
	cd tools/python && for f in $(INSTALLED_PYTHON); do \
	  install -D -m 644 $$f $(INSTALL_PREFIX)/share/gpumemtrace/python/$$f || exit 1; done
	install -m 644 README.md docs/*.md $(INSTALL_PREFIX)/share/doc/gpumemtrace/
	@echo "make install: $(INSTALL_PREFIX)/bin/gpumemtrace (put $(INSTALL_PREFIX)/bin on PATH)"

## uninstall: remove what make install put into PREFIX
uninstall:
	rm -f $(INSTALL_PREFIX)/bin/gpumemtrace $(INSTALL_PREFIX)/bin/gpumem-report \
	  $(INSTALL_PREFIX)/lib/libgpumemtrace.so $(INSTALL_PREFIX)/include/gpumemtrace.h
	rm -rf $(INSTALL_PREFIX)/share/gpumemtrace $(INSTALL_PREFIX)/share/doc/gpumemtrace

# ---- make gpu-bundle: what the device tool carries to a lent GPU (carry: ["dist/gpu"]) ----
# GPU_CHECK_PROGRAMS comes from tests/gpu/module.mk (the GPU checks' own fragment; none: no programs).
# It is read in the recipe, so the fragment may be included before or after this one.
GPU_BUNDLE := $(DIST)/gpu
# The device tool carries at most 64 MiB, the working tree included.
GPU_CARRY_LIMIT_MIB := 64

## gpu-bundle: dist/gpu/ (the unpacked bundle + GPU_CHECK_PROGRAMS) for tests/gpu/run.sh on a lent GPU
gpu-bundle: $(DIST_TARBALL)
	$(if $(strip $(GPU_CHECK_PROGRAMS)),+$(MAKE) --no-print-directory $(GPU_CHECK_PROGRAMS))
	rm -rf $(GPU_BUNDLE) && mkdir -p $(GPU_BUNDLE)/programs
	tar xzf $(DIST_TARBALL) -C $(GPU_BUNDLE) && mv $(GPU_BUNDLE)/$(DIST_NAME) $(GPU_BUNDLE)/gpumemtrace
	$(if $(strip $(GPU_CHECK_PROGRAMS)),cp $(GPU_CHECK_PROGRAMS) $(GPU_BUNDLE)/programs/)
	$(PYTHON) packaging/bundle.py carry-size $(GPU_BUNDLE) --limit-mib $(GPU_CARRY_LIMIT_MIB)

# ---- make dist-test: the proofs that the bundle and the wheel need nothing else ----
# The demo, the simulated runtime and the test programs are the traced side; the bundle is the tool.
DIST_TEST_BINS := $(BUILD)/examples/train_loop $(SIM_RUNTIME) $(DIST_TEST_PROGRAMS)

## dist-test: build the bundle and the wheel, then prove them (tests/dist: ELF checks, minimal root, venv)
dist-test: $(DIST_TARBALL) $(DIST_WHEEL) $(DIST_TEST_BINS) all
	@$(PYTHON) tests/run_tests.py --build $(BUILD) --suites dist

CLEAN_EXTRA += $(DIST)
.PHONY: dist dist-deps wheel install uninstall gpu-bundle dist-test
