"""One more output for an ONNX model's graph, spliced into its bytes.

Parsing a whole model with `onnx.load` and serializing it again costs about a second per
voice at every start (Kokoro's weights are 300 MB), for a change of a few bytes. Protocol
Buffers allow it without that: a repeated field's entries may be appended after the rest, so
only the graph's nodes are decoded (to find the tensor) and the weights are copied as they
are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import onnx

# Field numbers of onnx.proto3: ModelProto.graph, GraphProto.node and GraphProto.output.
_MODEL_GRAPH = 7
_GRAPH_NODE = 1
_GRAPH_OUTPUT = 12
_LENGTH_DELIMITED = 2


def exposing(model_path: Path, tensor: Callable[[onnx.GraphProto], str | None]) -> bytes:
    """The ONNX model at `model_path`, with the tensor `tensor` names in its graph (the
    durations; None when the graph is laid out otherwise) as one more output. `tensor` is
    given the graph's nodes and outputs only."""
    model = model_path.read_bytes()
    head, start, end = _graph_span(model)
    graph = memoryview(model)[start:end]
    nodes, outputs = [], []
    for number, value in _fields(graph):
        if number == _GRAPH_NODE:
            nodes.append(onnx.NodeProto.FromString(value))
        elif number == _GRAPH_OUTPUT:
            outputs.append(onnx.ValueInfoProto.FromString(value))
    name = tensor(onnx.GraphProto(node=nodes, output=outputs))
    if name is None or any(output.name == name for output in outputs):
        return model
    output = onnx.ValueInfoProto(name=name).SerializeToString()
    extra = _key(_GRAPH_OUTPUT) + _varint(len(output)) + output
    graph_field = _key(_MODEL_GRAPH) + _varint(end - start + len(extra))
    return b"".join([model[:head], graph_field, graph, extra, model[end:]])


def _graph_span(model: bytes) -> tuple[int, int, int]:
    """Where the graph field starts (its key), and where its value starts and ends."""
    position = 0
    while position < len(model):
        head = position
        key, position = _read_varint(model, position)
        number, wire = key >> 3, key & 7
        if wire == _LENGTH_DELIMITED:
            length, position = _read_varint(model, position)
            if number == _MODEL_GRAPH:
                return head, position, position + length
            position += length
        else:
            position = _skip(model, position, wire)
    raise ValueError("the ONNX model has no graph")


def _fields(message: memoryview) -> Iterator[tuple[int, bytes]]:
    """The length-delimited fields of `message`: (number, value)."""
    position = 0
    while position < len(message):
        key, position = _read_varint(message, position)
        number, wire = key >> 3, key & 7
        if wire == _LENGTH_DELIMITED:
            length, position = _read_varint(message, position)
            if number in (_GRAPH_NODE, _GRAPH_OUTPUT):  # the weights are never copied out
                yield number, bytes(message[position : position + length])
            position += length
        else:
            position = _skip(message, position, wire)


def _skip(data: bytes | memoryview, position: int, wire: int) -> int:
    if wire == 0:
        return _read_varint(data, position)[1]
    if wire in (1, 5):
        return position + (8 if wire == 1 else 4)
    raise ValueError(f"unexpected wire type {wire} in an ONNX model")


def _read_varint(data: bytes | memoryview, position: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, position
        shift += 7


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _key(number: int) -> bytes:
    return _varint(number << 3 | _LENGTH_DELIMITED)
