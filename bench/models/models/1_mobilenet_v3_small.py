# torchvision's MobileNetV3-small (random weights), a batch of 8 images at 224 x 224: the
# KernelBench problem format (Model, get_inputs, get_init_inputs) for bench/kernelbench/run.py.
import torch
import torchvision


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torchvision.models.mobilenet_v3_small(weights=None)

    def forward(self, x):
        return self.net(x)


def get_inputs():
    return [torch.randn(8, 3, 224, 224)]


def get_init_inputs():
    return []
