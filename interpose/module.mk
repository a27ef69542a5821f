# interpose/module.mk — see the top-level Makefile
