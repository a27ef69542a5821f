# trace/module.mk — trace/format.h is header-only; nothing to build.
