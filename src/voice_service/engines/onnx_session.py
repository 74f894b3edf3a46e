"""How every ONNX model here runs: the options each `onnxruntime.InferenceSession` gets."""

from __future__ import annotations

import onnxruntime

# The pool already runs one call per core, so one intra-op thread per session gives the best
# throughput and degrades least under load (figures: bench/engine_settings.md).
DEFAULT_INTRA_OP_THREADS = 1


def session_options(intra_op_threads: int) -> onnxruntime.SessionOptions:
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = intra_op_threads
    options.inter_op_num_threads = 1
    # Idle intra-op threads would otherwise spin and steal the core of a concurrent call.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options
