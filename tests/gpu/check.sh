#!/usr/bin/env bash
# The GPU check (design_docs/backends.md, "GPU"): LeNet-5, ResNet blocks, a transformer block and a tanh RNN, one
# training step after another on gradgen's GPU engine (Executor(CUDAPlace(0), backend="xla")), plain JAX (jit) and
# PyTorch (CUDA); gradgen's losses checked against its numpy reference on the CPU; a markdown table of median ms
# per step and ratios. All within 10 minutes (GRADGEN_GPU_CHECK_SECONDS), every step under its own timeout.
#
#   bash tests/gpu/check.sh                  a CUDA machine with pip's network: a venv beside the checkout
#                                            (GRADGEN_GPU_VENV; --fresh makes it anew) with gradgen[xla,onnx],
#                                            jax[cuda13] and torch==2.14.1 (CUDA 13 builds: driver 580 or newer;
#                                            GRADGEN_JAX_CUDA=cuda12 and GRADGEN_TORCH='torch==...' choose others)
#   bash tests/gpu/check.sh --use-installed  a CUDA machine whose python3 already holds CUDA builds of jax and
#                                            torch (no network): a venv that sees them, gradgen installed into it
#   bash tests/gpu/check.sh --cpu            no installs, this python ($PYTHON or python3), the CPU, fewer steps:
#                                            the same code path, run by tests/gpu/test_check_cpu.py
# Other arguments go to python -m tests.gpu.check (--workloads lenet,rnn --steps 30 --warmup 3 ...).
# Exit status: 0 passed, 1 a gradgen run failed or its losses differ, 2 no GPU visible (never a CPU fallback).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
total=${GRADGEN_GPU_CHECK_SECONDS:-600}
mode=gpu
fresh=0
forwarded=()
for arg in "$@"; do
    case "$arg" in
        --cpu) mode=cpu ;;
        --use-installed) mode=installed ;;
        --fresh) fresh=1 ;;
        *) forwarded+=("$arg") ;;
    esac
done
say() { echo "check.sh: $*" >&2; }
left() { echo $(( total - SECONDS )); }
base_python=${PYTHON:-python3}

if [[ $mode == cpu ]]; then
    exec timeout -k 10 "$(left)" "$base_python" -m tests.gpu.check --cpu --budget $(( total - 20 )) "${forwarded[@]}"
fi

if ! command -v nvidia-smi >/dev/null; then
    say "no nvidia-smi here: no NVIDIA driver, so no CUDA GPU (bash tests/gpu/check.sh --cpu runs the check on the CPU)"
    exit 2
fi
if ! timeout 60 nvidia-smi -L >&2; then
    say "nvidia-smi lists no GPU"
    exit 2
fi
driver_cuda=$(timeout 60 nvidia-smi | sed -n 's/.*CUDA Version: *\([0-9][0-9]*\).*/\1/p' | head -n 1)
if [[ -n $driver_cuda && $driver_cuda -lt 13 && -z ${GRADGEN_TORCH:-} ]]; then
    say "the driver runs CUDA $driver_cuda; the default CUDA 13 builds need 13: set GRADGEN_JAX_CUDA=cuda12 and" \
        "GRADGEN_TORCH to a CUDA 12 build of torch (its index, e.g. 'torch --index-url https://download.pytorch.org/whl/cu126')"
fi
venv=${GRADGEN_GPU_VENV:-$(dirname "$root")/gradgen-gpu-venv}
if [[ $fresh == 1 ]]; then
    rm -rf "$venv"
fi

if [[ $mode == installed ]]; then
    [[ -x $venv/bin/python ]] || timeout 120 "$base_python" -m venv --system-site-packages "$venv"
    # --system-site-packages reaches only the base interpreter's packages: when python3 is itself a venv (as on
    # images that keep torch and jax in one), a .pth file adds every package folder it sees behind the new venv's.
    seen_by_base=$("$base_python" -c 'import os, sys, sysconfig
std = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib")}
print("\n".join(p for p in sys.path if p and os.path.isdir(p) and p not in std and not p.endswith("lib-dynload")))')
    venv_site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    printf '%s\n' "$seen_by_base" > "$venv_site/gradgen_gpu_check_base.pth"
    say "installing gradgen (editable, no dependencies) into $venv beside $base_python's own packages"
    if ! timeout 300 "$venv/bin/python" -m pip install -q --no-deps --no-build-isolation -e "$root"; then
        say "gradgen did not install without the network: $base_python needs setuptools 64 or newer and wheel"
        exit 1
    fi
else
    [[ -x $venv/bin/python ]] || timeout 120 "$base_python" -m venv "$venv"
    jax_spec="jax[${GRADGEN_JAX_CUDA:-cuda13}]>=0.10.2,<0.11"   # gradgen's xla extra pins jax's minor release
    read -r -a torch_spec <<< "${GRADGEN_TORCH:-torch==2.14.1}"
    say "installing gradgen[xla,onnx], $jax_spec and ${torch_spec[*]} into $venv (several GB the first time)"
    timeout 420 "$venv/bin/python" -m pip install -q -e "$root[xla,onnx]" "$jax_spec" "${torch_spec[@]}"
fi

budget=$(( $(left) - 15 ))
if (( budget < 60 )); then
    say "the installs left ${budget} s of ${total} s; run again (the venv is kept, so they are quick the second time)"
    exit 1
fi
exec timeout -k 10 $(( budget + 10 )) "$venv/bin/python" -m tests.gpu.check --budget "$budget" "${forwarded[@]}"
