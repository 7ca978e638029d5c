# torchvision's ShuffleNetV2 x1.0 (random weights), a batch of 8 images at 224 x 224
# (KernelBench's problem format, for bench/kernelbench/run.py).
import torch
import torchvision


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torchvision.models.shufflenet_v2_x1_0(weights=None)

    def forward(self, x):
        return self.net(x)


def get_inputs():
    return [torch.randn(8, 3, 224, 224)]


def get_init_inputs():
    return []
