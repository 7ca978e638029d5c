# timm's ViT-Tiny/16 (random weights), a batch of 8 images at 224 x 224 (KernelBench's problem
# format, for bench/kernelbench/run.py). Attention as PyTorch modules compute it by hand
# (fused_attn off), the form an ONNX export keeps.
import timm
import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = timm.create_model("vit_tiny_patch16_224", pretrained=False)
        for m in self.net.modules():
            if hasattr(m, "fused_attn"):
                m.fused_attn = False

    def forward(self, x):
        return self.net(x)


def get_inputs():
    return [torch.randn(8, 3, 224, 224)]


def get_init_inputs():
    return []
