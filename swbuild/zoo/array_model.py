"""A model built in memory: the ModelProto without its weights, and the weights as numpy arrays.

The zoo builds its models this way and the ONNX importer (frontends/onnx.py) reads the arrays
as they are, so vgg16's 550 MB of weights are never serialised into protobuf and parsed back
(which held them two or three times at once)."""
from __future__ import annotations

import onnx
from onnx import helper, numpy_helper


class ArrayModel:
    """A model built in memory (the zoo): the ModelProto without initializers, and the
    initializers as numpy arrays (name -> array, in order). The importer reads the arrays
    as they are: vgg16's 550 MB are never serialised into protobuf and parsed back."""

    def __init__(self, proto: onnx.ModelProto, arrays: dict):
        self.proto, self.arrays = proto, arrays

    @property
    def graph(self):
        """The graph's nodes, inputs and outputs (its initializers are `arrays`, not in it)."""
        return self.proto.graph

    def to_proto(self) -> onnx.ModelProto:
        """The whole ModelProto (for onnxruntime, or to save), initializers in order."""
        m = onnx.ModelProto()
        m.CopyFrom(self.proto)
        for name, a in self.arrays.items():
            m.graph.initializer.add().CopyFrom(numpy_helper.from_array(a, name))
        return m

    def initializer_protos(self):
        """Placeholders of the initializers (name, type, dims, no data) for the checks."""
        return [onnx.TensorProto(name=n, dims=a.shape, data_type=helper.np_dtype_to_tensor_dtype(a.dtype))
                for n, a in self.arrays.items()]
