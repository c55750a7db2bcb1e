"""Tests of gradgen.framework.function: a Python function of layers run as a cached program."""
