"""Builds the tiny offline checkpoint: a random-weight Llama with a tokenizer trained locally.

No model hub is reachable here or in CI, so nothing is downloaded: a byte-level BPE
tokenizer is trained with the ``tokenizers`` library on generated text, a small
``LlamaConfig`` gets random weights from a seeded generator, and both are saved with
``save_pretrained`` (safetensors) together with a ChatML chat template. The same seed gives
the same files. vLLM's CPU attention needs ``head_dim`` >= 32 (it accepts 32, 64, ...).

Usage: ``python -m serve_apps.checkpoint DIR [--seed N]`` or ``availproof checkpoint DIR``.
A user's real checkpoint directory is accepted wherever this one is (``--model-path``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
DEFAULT_DIR = Path(os.environ.get("AVAILPROOF_HOME", Path.home() / ".availproof")) / "models" / "tiny-llama"
MARKER = "availproof-checkpoint.json"


def corpus(seed: int, lines: int = 4000) -> list[str]:
    rng = random.Random(seed)
    words = ("the a zone region replica node head redis serve model token stream request answer fail "
             "recover health check steady state bound trial kill restart partition network cluster engine "
             "latency goodput time first success detect window proxy route deploy user assistant system "
             "what is how why when where which one two three four five yes no ok error retry wait").split()
    out = []
    for _ in range(lines):
        n = rng.randint(4, 24)
        out.append(" ".join(rng.choice(words) for _ in range(n)) + rng.choice([".", "?", "!", ""]))
    return out


def build_tokenizer(out_dir: str | Path, seed: int = 0, vocab_size: int = 1024):
    """Train the checkpoint's tokenizer (byte-level BPE on :func:`corpus`) and save it into ``out_dir``; returns it.
    Offline and deterministic: the same seed gives the same vocabulary (the load harness builds it alone to
    pick its whole-word tokens, :mod:`chaos.load.golden`, when no checkpoint is on the rig's machine)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(seed), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|im_start|>", eos_token="<|im_end|>",
                                   unk_token="<|endoftext|>", pad_token="<|endoftext|>")
    fast.chat_template = CHAT_TEMPLATE
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(out_dir)
    return fast


def build(out_dir: str | Path = DEFAULT_DIR, seed: int = 0, vocab_size: int = 1024, hidden: int = 128,
          layers: int = 2, heads: int = 4, kv_heads: int = 2, intermediate: int = 256,
          max_positions: int = 1024) -> Path:
    """Write the checkpoint into ``out_dir`` (idempotent for the same parameters)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    out = Path(out_dir)
    params = {"seed": seed, "vocab_size": vocab_size, "hidden": hidden, "layers": layers, "heads": heads,
              "kv_heads": kv_heads, "intermediate": intermediate, "max_positions": max_positions}
    marker = out / MARKER
    if marker.exists() and json.loads(marker.read_text()).get("params") == params:
        return out
    if hidden // heads < 32:
        raise ValueError("vLLM's CPU attention needs head_dim = hidden / heads >= 32")
    out.mkdir(parents=True, exist_ok=True)

    fast = build_tokenizer(out, seed, vocab_size)

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(fast), hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=hidden // heads,
        max_position_embeddings=max_positions, bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id, tie_word_embeddings=True, torch_dtype="float32",
    )
    model = LlamaForCausalLM(config)
    model.save_pretrained(out, safe_serialization=True)
    (out / "generation_config.json").unlink(missing_ok=True)  # sampling defaults come from the request
    digest = hashlib.sha256((out / "model.safetensors").read_bytes()).hexdigest()
    marker.write_text(json.dumps({"params": params, "model_sha256": digest}, indent=2))
    return out


def check(path: str | Path) -> Path:
    """Refuse a directory that is not a loadable checkpoint, with a one-line reason."""
    from chaos.base.errors import SetupError

    p = Path(path)
    if not (p / "config.json").exists():
        raise SetupError(f"{p}: no checkpoint there (config.json missing); build one with `availproof checkpoint`")
    if not any(p.glob("*.safetensors")) and not any(p.glob("*.bin")):
        raise SetupError(f"{p}: checkpoint has no weights (*.safetensors / *.bin)")
    if not (p / "tokenizer_config.json").exists():
        raise SetupError(f"{p}: checkpoint has no tokenizer (tokenizer_config.json)")
    return p


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir", nargs="?", default=str(DEFAULT_DIR))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    path = build(args.out_dir, seed=args.seed)
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
