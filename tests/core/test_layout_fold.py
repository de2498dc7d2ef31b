"""frontends/layout_fold.py folds Reshape, Unsqueeze, Squeeze, Flatten and Identity exactly as
onnx's ReferenceEvaluator does (same shape, dtype and bytes), and leaves to it every case it
does not take (it then words the error)."""
import random

import numpy as np
import pytest
from onnx import AttributeProto, helper
from onnx.reference import ReferenceEvaluator

from swbuild.frontends import layout_fold


def reference(op, values, attrs, opset):
    names = [f"i{k}" for k in range(len(values))]
    node = helper.make_node(op, [n if v is not None else "" for n, v in zip(names, values)], ["o"],
                            **{k: v for k, v in attrs.items() if v != []})
    node.attribute.extend(helper.make_attribute(k, v, attr_type=AttributeProto.INTS)
                          for k, v in attrs.items() if v == [])
    vis = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape))
           for n, v in zip(names, values) if v is not None]
    m = helper.make_model(helper.make_graph([node], "g", vis, [helper.make_tensor_value_info("o", 0, None)]),
                          opset_imports=[helper.make_opsetid("", opset)])
    return ReferenceEvaluator(m).run(None, {n: v for n, v in zip(names, values) if v is not None})[0]


def cases(seed):
    rnd = random.Random(seed)
    for _ in range(40):
        shape = [rnd.choice([1, 1, 2, 3, 4]) for _ in range(rnd.randint(0, 4))]
        data = np.arange(int(np.prod(shape)), dtype=rnd.choice([np.float32, np.int64])).reshape(shape)
        opset = rnd.choice([11, 13, 17])
        r = len(shape)
        # Unsqueeze: 1-2 distinct axes of the output, negatives too
        k = rnd.randint(1, 2)
        axes = rnd.sample(range(-(r + k), r + k), k)
        if len({a % (r + k) for a in axes}) == k:
            yield ("Unsqueeze", [data, np.array(axes)], {}, opset) if opset >= 13 else \
                  ("Unsqueeze", [data], {"axes": axes}, opset)
        ones = [i for i, d in enumerate(shape) if d == 1]
        sq = rnd.sample(ones, rnd.randint(0, len(ones))) if ones else []
        sq = [a - r if rnd.random() < 0.5 else a for a in sq]
        if opset >= 13:
            yield "Squeeze", [data] + ([np.array(sq)] if sq else []), {}, opset
        else:
            yield "Squeeze", [data], ({"axes": sq} if sq else {}), opset
        flat = rnd.randint(-r, r)
        yield "Flatten", [data], {"axis": flat}, opset
        yield "Identity", [data], {}, opset
        target = list(shape)
        rnd.shuffle(target)
        if target:
            target[rnd.randrange(len(target))] = -1
        if target and rnd.random() < 0.5:
            i = rnd.randrange(len(target))
            if i < r and target[i] != -1:
                target[i] = 0                          # copy the input's dimension
        yield "Reshape", [data, np.array(target, np.int64)], {}, opset


@pytest.mark.parametrize("seed", range(8))
def test_the_same_array_as_the_reference(seed):
    done = refused = 0
    for op, values, attrs, opset in cases(seed):
        got = layout_fold.fold(op, values, attrs, opset)
        try:
            want = reference(op, values, attrs, opset)
        except Exception:           # noqa: BLE001 -- the reference refuses it: so must the rules
            assert got is None, (op, [v.shape for v in values], attrs, opset)
            refused += 1
            continue
        if got is None:             # left to the reference: only the old opsets' unordered axes
            assert opset < 13 and op in ("Unsqueeze", "Squeeze"), (op, attrs, opset)
            continue
        assert got.shape == want.shape and got.dtype == want.dtype and got.tobytes() == want.tobytes()
        assert not np.shares_memory(got, values[0])
        done += 1
    assert done > 100


@pytest.mark.parametrize("opset", [11, 13])
def test_empty_squeeze_axes_as_the_reference_reads_them(opset):
    data = np.zeros((1, 3, 1), np.float32)
    values, attrs = ([data, np.array([], np.int64)], {}) if opset >= 13 else ([data], {"axes": []})
    got, want = layout_fold.fold("Squeeze", values, attrs, opset), reference("Squeeze", values, attrs, opset)
    assert got.shape == want.shape                  # opset 11: all ones removed; 13: none


@pytest.mark.parametrize("op, values, attrs, opset", [
    ("Reshape", [np.zeros((2, 3)), np.array([4, -1])], {}, 13),            # 6 elements do not make 4 x k
    ("Reshape", [np.zeros((2, 3)), np.array([-1, -1])], {}, 13),
    ("Reshape", [np.zeros((2, 3)), np.array([6, 0, 1])], {}, 13),          # a 0 past the input's rank
    ("Unsqueeze", [np.zeros(3), np.array([0, 0])], {}, 13),                # the same axis twice
    ("Unsqueeze", [np.zeros(3), np.array([5])], {}, 13),
    ("Squeeze", [np.zeros((2, 1)), np.array([0])], {}, 13),                # not a dimension of 1
    ("Flatten", [np.zeros((2, 3))], {"axis": 3}, 13),
    ("Reshape", [np.zeros((2, 3)), None], {}, 13),                         # the shape is not constant
    ("Transpose", [np.zeros((2, 3))], {}, 13),                             # not a layout rule here
    ("Squeeze", [np.zeros((2, 1))], {"unknown": 1}, 13),
])
def test_what_it_does_not_take_goes_to_the_reference(op, values, attrs, opset):
    assert layout_fold.fold(op, values, attrs, opset) is None
