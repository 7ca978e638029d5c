# A small Llama from transformers (random weights: 4 layers, hidden 512, 8 heads of 64, SwiGLU
# MLP of 1408, RoPE, RMSNorm, eager attention with its causal mask), 4 sequences of 128
# token embeddings in, the last hidden states out (KernelBench's problem format, for
# bench/kernelbench/run.py).
import torch
import transformers


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        config = transformers.LlamaConfig(
            hidden_size=512,
            intermediate_size=1408,
            num_hidden_layers=4,
            num_attention_heads=8,
            num_key_value_heads=8,
            vocab_size=1000,
            max_position_embeddings=256,
            attn_implementation="eager",
        )
        self.net = transformers.LlamaModel(config)
        # An explicit mask (no padding): without one the exporter meets the packed-sequence
        # check (aten::diff), which ONNX has no operator for.
        self.register_buffer("mask", torch.ones(4, 128, dtype=torch.long), persistent=False)

    def forward(self, x):
        return self.net(inputs_embeds=x, attention_mask=self.mask, use_cache=False).last_hidden_state


def get_inputs():
    return [torch.randn(4, 128, 512)]


def get_init_inputs():
    return []
