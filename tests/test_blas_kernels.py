"""FAISS's bundled OpenBLAS is pointed at the CPU's kernels (bitext_hf.blas_kernels): the family chosen from the
CPU's flags, a user's own choice kept, and, on a CPU with AVX-512 or AVX2, FAISS imported after bitext_hf runs
them instead of the generic ones."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from bitext_hf.blas_kernels import (
    HASWELL_FLAGS,
    SKYLAKEX_FLAGS,
    choose_openblas_kernels,
    cpu_flags,
    openblas_core_type,
)


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (SKYLAKEX_FLAGS | HASWELL_FLAGS | {"sse3"}, "SkylakeX"),
        ((SKYLAKEX_FLAGS - {"avx512bw"}) | HASWELL_FLAGS, "Haswell"),  # AVX-512F alone is not enough for SkylakeX
        (HASWELL_FLAGS | {"sse3"}, "Haswell"),
        (frozenset({"sse3", "avx"}), None),
        (frozenset(), None),  # no /proc/cpuinfo (macOS) or an ARM CPU: OpenBLAS's own choice
    ],
)
def test_the_kernel_family_follows_the_cpu_flags(flags, expected):
    assert openblas_core_type(flags) == expected


def test_the_variable_is_set_from_cpuinfo_unless_the_user_set_it(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse3 avx2 fma\n\nprocessor\t: 1\nflags\t\t: fpu\n")
    assert cpu_flags(str(cpuinfo)) >= {"avx2", "fma"}
    environ: dict[str, str] = {}
    assert choose_openblas_kernels(environ, str(cpuinfo)) == "Haswell" and environ == {"OPENBLAS_CORETYPE": "Haswell"}
    mine = {"OPENBLAS_CORETYPE": "Zen"}
    assert choose_openblas_kernels(mine, str(cpuinfo)) is None and mine == {"OPENBLAS_CORETYPE": "Zen"}
    assert choose_openblas_kernels({}, str(tmp_path / "absent")) is None


def test_faiss_imported_after_bitext_hf_runs_the_cpus_kernels():
    expected = openblas_core_type(cpu_flags())
    if expected is None:
        pytest.skip("this CPU has neither AVX-512 nor AVX2")
    pytest.importorskip("threadpoolctl")
    code = (
        "import json, bitext_hf, faiss\n"
        "from threadpoolctl import threadpool_info\n"
        "print(json.dumps([i.get('architecture') for i in threadpool_info()"
        " if i['internal_api'] == 'openblas' and 'faiss' in i['filepath']]))\n"
    )
    environment = {key: value for key, value in os.environ.items() if key != "OPENBLAS_CORETYPE"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment, check=True)
    architectures = json.loads(result.stdout.strip().splitlines()[-1])
    if not architectures:
        pytest.skip("this FAISS build does not bundle OpenBLAS")
    assert architectures == [expected]
