"""A model's architecture, read from a Hugging Face `config.json`, and its parameter count.

Everything the memory and performance models need is derived here from the config itself:
layers, heads, KV heads, head_dim, MoE shape, MLA ranks, sliding-window layout, tied
embeddings. Parameter counts are computed from the shapes (not read from a model card), so
a config the catalog has never seen is sized the same way as a catalog entry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tokenfleet.errors import UserError

# Families whose config class defaults tie_word_embeddings to True when the key is absent.
_TIED_BY_DEFAULT = ("gemma",)
# Families whose q/k/v projections carry a bias even when the config does not say so.
_QKV_BIAS_BY_DEFAULT = ("qwen2",)


@dataclass(frozen=True)
class Attention:
    """Per-layer attention shape."""

    heads: int
    kv_heads: int
    head_dim: int
    # MLA (DeepSeek V2/V3): the KV cache holds one latent of kv_lora_rank + qk_rope_head_dim.
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0


@dataclass(frozen=True)
class MoE:
    experts: int
    experts_per_token: int
    expert_intermediate: int
    shared_experts: int = 0
    # Number of leading layers that use a dense MLP instead of experts (DeepSeek).
    first_dense_layers: int = 0


@dataclass(frozen=True)
class ParamCounts:
    """Parameter counts by part; `linear_*` are the parts quantization applies to."""

    embedding: int
    lm_head: int
    attention: int
    dense_mlp: int
    experts: int
    shared_experts_and_router: int
    norms: int
    vision: int
    active_experts: int

    @property
    def total(self) -> int:
        return (
            self.embedding
            + self.lm_head
            + self.attention
            + self.dense_mlp
            + self.experts
            + self.shared_experts_and_router
            + self.norms
            + self.vision
        )

    @property
    def active(self) -> int:
        """Parameters touched per token (MoE: only the routed top-k experts)."""
        return self.total - self.experts + self.active_experts


@dataclass(frozen=True)
class ModelArch:
    """The architecture facts the capacity model needs, all derived from config.json."""

    name: str
    model_type: str
    layers: int
    hidden: int
    intermediate: int
    vocab: int
    max_context: int
    attention: Attention
    tied_embeddings: bool
    qkv_bias: bool = False
    moe: MoE | None = None
    # Sliding-window attention: window size and which layers use it (layer index -> bool).
    sliding_window: int = 0
    sliding_layers: tuple[bool, ...] = ()
    # quantization_config as found in config.json (empty when the weights are not quantized).
    quantization_config: Mapping[str, Any] = field(default_factory=dict)
    torch_dtype: str = "bfloat16"
    vision_params: int = 0
    # Multi-token-prediction layers shipped with the model (DeepSeek-V3's
    # num_nextn_predict_layers), and an EAGLE-3 head's draft vocabulary (draft_vocab_size):
    # what speculative decoding sizes (capacity/speculative.py).
    mtp_layers: int = 0
    draft_vocab: int = 0

    @property
    def num_sliding_layers(self) -> int:
        return sum(self.sliding_layers)

    def sliding_between(self, start: int, stop: int) -> int:
        """Sliding-window layers among layers [start, stop): per pipeline stage, with no
        per-layer list when no layer slides (a dense model's stages are pure arithmetic)."""
        if not self.sliding_layers:
            return 0
        return sum(self.sliding_layers[start:stop])

    @property
    def num_full_layers(self) -> int:
        return self.layers - self.num_sliding_layers

    @property
    def is_hybrid(self) -> bool:
        """Both sliding-window and full-attention layers (gpt-oss, Gemma 3)."""
        return 0 < self.num_sliding_layers < self.layers

    @property
    def params(self) -> ParamCounts:
        return count_params(self)


def _get(cfg: Mapping[str, Any], key: str, source: str) -> Any:
    if key not in cfg or cfg[key] is None:
        raise UserError(
            f"{source}: config key '{key}'",
            "missing",
            "the capacity model needs it to size the model",
            f"add '{key}' to the config.json (copy it from the model's Hugging Face repo)",
        )
    return cfg[key]


# Sane upper bounds of config.json values: ~8-16x the largest published model, so every real
# checkpoint passes and a hostile one (num_hidden_layers: 1e12) is refused before any
# arithmetic or allocation scales with it. Largest known values, for reference: 126 layers
# (Llama 3.1 405B), hidden 16384 and 128 heads (405B), head_dim 256 (Gemma), vocab 262144
# (Gemma 3), intermediate 53248 (405B), context 10M (Llama 4 Scout), 384 experts (Kimi K2),
# MLA ranks 1536 (DeepSeek V3), vision towers of 48 layers at hidden 1664.
BOUNDS: dict[str, int] = {
    "num_hidden_layers": 1024,
    "hidden_size": 131072,
    "num_attention_heads": 2048,
    "num_key_value_heads": 2048,
    "head_dim": 4096,
    "vocab_size": 4194304,
    "intermediate_size": 1048576,
    "moe_intermediate_size": 1048576,
    "max_position_embeddings": 134217728,
    "max_sequence_length": 134217728,
    "num_local_experts": 8192,
    "num_experts": 8192,
    "n_routed_experts": 8192,
    "num_experts_per_tok": 8192,
    "experts_per_token": 8192,
    "n_shared_experts": 64,
    "first_k_dense_replace": 1024,
    "kv_lora_rank": 65536,
    "q_lora_rank": 65536,
    "qk_rope_head_dim": 4096,
    "qk_nope_head_dim": 4096,
    "v_head_dim": 4096,
    "sliding_window": 134217728,
    "sliding_window_pattern": 1024,
    "patch_size": 1024,
    "image_size": 65536,
    "num_channels": 64,
    "num_nextn_predict_layers": 64,
    "draft_vocab_size": 4194304,
}


def _bounded(value: Any, key: str, source: str, minimum: int) -> int:
    """An integer config value within [minimum, BOUNDS[key]], else a UserError naming it."""
    maximum = BOUNDS.get(key, 2**31)
    # JSON has no int/float split for whole numbers written as 32.0; accept those.
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not minimum <= value <= maximum:
        raise UserError(
            f"{source}: config key '{key}'",
            value,
            f"must be an integer from {minimum} to {maximum}",
            "fix the config.json value (copy it from the model's Hugging Face repo)",
        )
    return value


def _positive_int(cfg: Mapping[str, Any], key: str, source: str) -> int:
    return _bounded(_get(cfg, key, source), key, source, 1)


def _optional_int(cfg: Mapping[str, Any], key: str, source: str, default: int = 0) -> int:
    """A key that may be absent or null (-> default); when present it must be in bounds."""
    value = cfg.get(key)
    if value is None:
        return default
    return _bounded(value, key, source, 0)


def _sliding_layout(
    cfg: Mapping[str, Any], layers: int, source: str
) -> tuple[int, tuple[bool, ...]]:
    """Which layers use a sliding window, from the several ways configs say it."""
    window = _optional_int(cfg, "sliding_window", source)
    if cfg.get("use_sliding_window") is False:  # Qwen2 ships a window it does not use.
        return 0, ()
    if not window:
        return 0, ()
    layer_types = cfg.get("layer_types")
    if isinstance(layer_types, list) and len(layer_types) == layers:
        return int(window), tuple(t == "sliding_attention" for t in layer_types)
    pattern = _optional_int(cfg, "sliding_window_pattern", source)
    if pattern > 1:
        # Gemma 3: every `pattern`-th layer is global, the rest are local.
        return int(window), tuple((i + 1) % pattern != 0 for i in range(layers))
    if window >= _optional_int(cfg, "max_position_embeddings", source) > 0:
        return 0, ()  # a window as long as the context is no window at all
    return int(window), tuple(True for _ in range(layers))  # Mistral v0.1: every layer


def _vision_params(cfg: Mapping[str, Any], text_hidden: int, source: str) -> int:
    """A ViT-style vision tower (SigLIP in Gemma 3) plus its projector, from vision_config."""
    vision = cfg.get("vision_config")
    if not isinstance(vision, Mapping):
        return 0
    src = f"{source}: vision_config"
    hidden = _optional_int(vision, "hidden_size", src)
    inter = _optional_int(vision, "intermediate_size", src)
    layers = _optional_int(vision, "num_hidden_layers", src)
    patch = _optional_int(vision, "patch_size", src, 14)  # SigLIP / CLIP ViT-L/14 defaults
    image = _optional_int(vision, "image_size", src, 224)
    channels = _optional_int(vision, "num_channels", src, 3)
    per_layer = 4 * hidden * hidden + 4 * hidden + 2 * hidden * inter + hidden + inter + 4 * hidden
    patches = (image // patch) ** 2 if patch else 0
    embed = patch * patch * channels * hidden + hidden + patches * hidden
    return layers * per_layer + embed + 2 * hidden + hidden * text_hidden


def parse_config(config: Mapping[str, Any], name: str, source: str | None = None) -> ModelArch:
    """Build a ModelArch from a Hugging Face config.json mapping.

    `source` names where the config came from, for error messages (a path or a catalog id).
    Multimodal configs (Gemma 3) keep the language model under `text_config`.
    """
    src = source or name
    outer = config
    cfg: Mapping[str, Any] = config
    if isinstance(config.get("text_config"), Mapping):
        cfg = {**config, **config["text_config"]}
    model_type = str(outer.get("model_type", cfg.get("model_type", "unknown")))

    layers = _positive_int(cfg, "num_hidden_layers", src)
    hidden = _positive_int(cfg, "hidden_size", src)
    heads = _positive_int(cfg, "num_attention_heads", src)
    kv_heads = _optional_int(cfg, "num_key_value_heads", src) or heads
    if kv_heads > heads:
        raise UserError(
            f"{src}: config key 'num_key_value_heads'",
            kv_heads,
            f"is more than num_attention_heads ({heads})",
            "fix the config.json value (KV heads are shared by groups of query heads)",
        )
    head_dim = _optional_int(cfg, "head_dim", src) or max(hidden // heads, 1)
    vocab = _positive_int(cfg, "vocab_size", src)
    intermediate = _positive_int(cfg, "intermediate_size", src)
    max_context = (
        _optional_int(cfg, "max_position_embeddings", src)
        or _optional_int(cfg, "max_sequence_length", src)
        or _positive_int(cfg, "max_position_embeddings", src)
    )

    attention = Attention(
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        kv_lora_rank=_optional_int(cfg, "kv_lora_rank", src),
        q_lora_rank=_optional_int(cfg, "q_lora_rank", src),
        qk_rope_head_dim=_optional_int(cfg, "qk_rope_head_dim", src),
        qk_nope_head_dim=_optional_int(cfg, "qk_nope_head_dim", src),
        v_head_dim=_optional_int(cfg, "v_head_dim", src),
    )
    if attention.is_mla and not attention.qk_rope_head_dim:
        _get(cfg, "qk_rope_head_dim", src)

    experts = (
        _optional_int(cfg, "num_local_experts", src)
        or _optional_int(cfg, "num_experts", src)
        or _optional_int(cfg, "n_routed_experts", src)
    )
    moe = None
    if experts > 1:
        top_k = _optional_int(cfg, "num_experts_per_tok", src) or _optional_int(
            cfg, "experts_per_token", src
        )
        if top_k <= 0:
            _get(cfg, "num_experts_per_tok", src)
        if top_k > experts:
            raise UserError(
                f"{src}: config key 'num_experts_per_tok'",
                top_k,
                f"is more than the {experts} experts",
                "fix the config.json value",
            )
        moe = MoE(
            experts=experts,
            experts_per_token=top_k,
            expert_intermediate=_optional_int(cfg, "moe_intermediate_size", src) or intermediate,
            shared_experts=_optional_int(cfg, "n_shared_experts", src),
            first_dense_layers=min(_optional_int(cfg, "first_k_dense_replace", src), layers),
        )

    window, sliding = _sliding_layout(cfg, layers, src)
    tied_default = any(model_type.startswith(p) for p in _TIED_BY_DEFAULT)
    tied = bool(outer.get("tie_word_embeddings", cfg.get("tie_word_embeddings", tied_default)))
    qkv_bias = bool(cfg.get("attention_bias", False)) or any(
        model_type == p for p in _QKV_BIAS_BY_DEFAULT
    )
    quant = outer.get("quantization_config") or cfg.get("quantization_config") or {}
    if not isinstance(quant, Mapping):
        raise UserError(
            f"{src}: config key 'quantization_config'",
            type(quant).__name__,
            "must be an object",
            "copy it verbatim from the checkpoint's config.json",
        )
    return ModelArch(
        name=name,
        model_type=model_type,
        layers=layers,
        hidden=hidden,
        intermediate=intermediate,
        vocab=vocab,
        max_context=max_context,
        attention=attention,
        tied_embeddings=tied,
        qkv_bias=qkv_bias,
        moe=moe,
        sliding_window=window,
        sliding_layers=sliding,
        quantization_config=dict(quant),
        torch_dtype=str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16"),
        vision_params=_vision_params(outer, hidden, src),
        mtp_layers=_optional_int(cfg, "num_nextn_predict_layers", src),
        draft_vocab=_optional_int(cfg, "draft_vocab_size", src),
    )


def _attention_params(arch: ModelArch) -> int:
    a, h = arch.attention, arch.hidden
    if a.is_mla:
        qk_head = a.qk_nope_head_dim + a.qk_rope_head_dim
        if a.q_lora_rank:
            q = h * a.q_lora_rank + a.q_lora_rank + a.q_lora_rank * a.heads * qk_head
        else:
            q = h * a.heads * qk_head
        kv_down = h * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank
        kv_up = a.kv_lora_rank * a.heads * (a.qk_nope_head_dim + a.v_head_dim)
        out = a.heads * a.v_head_dim * h
        return q + kv_down + kv_up + out
    q = h * a.heads * a.head_dim
    kv = 2 * h * a.kv_heads * a.head_dim
    out = a.heads * a.head_dim * h
    bias = (a.heads + 2 * a.kv_heads) * a.head_dim if arch.qkv_bias else 0
    return q + kv + out + bias


def count_params(arch: ModelArch) -> ParamCounts:
    """Parameters by part, computed from the shapes in the config."""
    h, layers = arch.hidden, arch.layers
    embedding = arch.vocab * h
    lm_head = 0 if arch.tied_embeddings else arch.vocab * h
    attention = layers * _attention_params(arch)
    norms = layers * 2 * h + h
    gated_mlp = 3 * h  # gate, up and down projections per intermediate unit
    dense_mlp = experts = shared = active_experts = 0
    if arch.moe is None:
        dense_mlp = layers * gated_mlp * arch.intermediate
    else:
        m = arch.moe
        moe_layers = layers - m.first_dense_layers
        dense_mlp = m.first_dense_layers * gated_mlp * arch.intermediate
        per_expert = gated_mlp * m.expert_intermediate
        experts = moe_layers * m.experts * per_expert
        active_experts = moe_layers * m.experts_per_token * per_expert
        router = h * m.experts
        shared = moe_layers * (m.shared_experts * per_expert + router)
    return ParamCounts(
        embedding=embedding,
        lm_head=lm_head,
        attention=attention,
        dense_mlp=dense_mlp,
        experts=experts,
        shared_experts_and_router=shared,
        norms=norms,
        vision=arch.vision_params,
        active_experts=active_experts,
    )
