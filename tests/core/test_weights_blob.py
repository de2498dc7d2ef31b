"""The weights blob streamed from the graph's arrays, and a ModelProto handed over to the compiler."""
import io

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from swbuild.backends.blob import WeightsBlob
from swbuild.driver.compiler import write_outputs
from swbuild.support.errors import ModelError
from swbuild.frontends.onnx import Handover, import_model, load_model


def test_blob_layout_alignment_and_byte_order():
    b = WeightsBlob(64)
    big = np.arange(3, dtype=">f4")                 # big-endian in, little-endian out
    assert b.add(big, "float32") == 0
    assert b.add(np.ones((2, 2), np.float32), "float32") == 64
    assert len(b) == 80
    want = np.arange(3, dtype="<f4").tobytes() + bytes(52) + np.ones(4, "<f4").tobytes()
    f = io.BytesIO()
    b.write_to(f)
    assert f.getvalue() == want == bytes(b)
    assert b == want


def test_write_outputs_streams_a_blob(tmp_path):
    b = WeightsBlob(64)
    b.add(np.full(5, 2.5, np.float32), "float32")
    b.add(np.array([7], np.int64), "int64")
    write_outputs(tmp_path, {"m_weights.bin": b, "m.h": b"/* h */\n"})
    assert (tmp_path / "m_weights.bin").read_bytes() == np.full(5, 2.5, "<f4").tobytes() + bytes(44) + \
        np.array([7], "<i8").tobytes()
    assert (tmp_path / "m.h").read_bytes() == b"/* h */\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.h", "m_weights.bin"]


def _model():
    w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])], initializer=[w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def test_handover_gives_the_proto_up_once():
    h = Handover(_model())
    graph = import_model(load_model(h), name="m")
    assert h.model is None
    assert graph.tensors["y"].shape == (1, 3)
    assert np.array_equal(graph.tensors["w"].data, np.arange(6, dtype=np.float32).reshape(2, 3))
    with pytest.raises(ModelError, match="loaded twice"):
        load_model(h)


def test_blob_writes_a_big_strided_view_in_parts(monkeypatch):
    """A re-laid-out constant is a strided view (schedule/dma.py): written in CHUNK parts,
    the bytes are those of the contiguous copy."""
    from swbuild.backends import blob as blob_mod
    from swbuild.backends.sunway.schedule.dma import blocked_array
    monkeypatch.setattr(blob_mod, "CHUNK", 64)
    a = np.arange(24 * 10, dtype=np.float32).reshape(24, 10)
    view, grid = blocked_array(a, (24, 10), (4, 5))
    assert grid == [6, 2] and not view.flags.c_contiguous and np.shares_memory(view, a)
    b = WeightsBlob(64)
    b.add(np.ones(3, np.float32), "float32")
    assert b.add(view, "float32") == 64
    assert len(b) == 64 + a.nbytes
    f = io.BytesIO()
    b.write_to(f)
    want = np.ones(3, "<f4").tobytes() + bytes(52) + np.ascontiguousarray(view).astype("<f4").tobytes()
    assert f.getvalue() == want == bytes(b)
