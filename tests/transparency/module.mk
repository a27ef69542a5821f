# tests/transparency/module.mk — real test suites nobody here wrote, plain and traced (issue 27).

## test-transparency: CPython's and pyflakes' own tests, plain and under `gpumemtrace run`; any test whose outcome differs fails (about 10 minutes on 2 cores; not in `make test`)
test-transparency: all
	@$(PYTHON) tests/transparency/transparency.py --build $(BUILD)
.PHONY: test-transparency
