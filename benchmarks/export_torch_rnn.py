"""Export the issue-20 PyTorch models to ONNX: a 2-layer GRU and a 2-layer bidirectional
LSTM (hidden 256, 32 steps, batch 4, input 128). Needs torch (not a dependency of swbuild).

    python benchmarks/export_torch_rnn.py OUT_DIR      -> OUT_DIR/gru2.onnx, OUT_DIR/bilstm2.onnx

Then, for each model and target:  swbuild check OUT_DIR/gru2.onnx --target sunway-emu
"""
import sys
from pathlib import Path

import torch

T, B, I, H = 32, 4, 128, 256


class Seq(torch.nn.Module):
    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn

    def forward(self, x):
        y, _ = self.rnn(x)
        return y


def export(module, path):
    torch.manual_seed(0)
    x = torch.randn(T, B, I)
    module.eval()
    torch.onnx.export(module, (x,), str(path), input_names=["x"], output_names=["y"], opset_version=14, dynamo=False)
    return path


def main(out):
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    gru = Seq(torch.nn.GRU(I, H, num_layers=2))
    lstm = Seq(torch.nn.LSTM(I, H, num_layers=2, bidirectional=True))
    for name, m in (("gru2", gru), ("bilstm2", lstm)):
        print(export(m, out / f"{name}.onnx"))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "torch_rnn")
