"""bitext-hf: multilingual sentence alignment and bitext mining, Hugging Face native.

``import bitext_hf`` imports neither torch nor transformers (so that the CLI starts fast) and registers nothing.
The model families are registered with ``AutoConfig`` / ``AutoModel`` when ``bitext_hf.modeling`` is imported
(``import bitext_hf.modeling``, or any ``from bitext_hf.modeling... import``); after that their checkpoints load with
``AutoModel.from_pretrained(path)`` without ``trust_remote_code``. ``load_encoder`` (hence ``bitext-hf mine`` and
``eval --model``) imports it itself, and the recipes build their models from it.
"""

from __future__ import annotations

from bitext_hf.blas_kernels import choose_openblas_kernels

__version__ = "0.1.0"

choose_openblas_kernels()  # before FAISS loads its OpenBLAS (bitext_hf.blas_kernels says why)

__all__ = ["__version__"]
