"""The GPU check: four training workloads on gradgen's GPU engine, plain JAX and PyTorch (``check.sh``)."""
