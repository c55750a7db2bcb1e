"""Tests of gradgen.function: a Python function of layers run as a cached program."""
