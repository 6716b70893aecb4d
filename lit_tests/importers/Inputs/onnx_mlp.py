"""Write a small ONNX model for the importer's lit test: RMSNorm, then a biased linear with
ReLU, then an unrecognized Softmax (named nodes, a dynamic batch dim, seeded weights)."""

import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(0)
inits = [numpy_helper.from_array(a, n) for n, a in [
    ("two", np.array(2.0, np.float32)), ("axes", np.array([-1], np.int64)),
    ("eps", np.array(1e-6, np.float32)), ("gamma", rng.standard_normal(16).astype(np.float32)),
    ("w", rng.standard_normal((16, 32)).astype(np.float32)),
    ("b", rng.standard_normal(32).astype(np.float32))]]
nodes = [
    helper.make_node("Pow", ["x", "two"], ["sq"], name="norm/pow"),
    helper.make_node("ReduceMean", ["sq", "axes"], ["ms"], name="norm/mean"),
    helper.make_node("Add", ["ms", "eps"], ["mse"], name="norm/add"),
    helper.make_node("Sqrt", ["mse"], ["rms"], name="norm/sqrt"),
    helper.make_node("Div", ["x", "rms"], ["xn"], name="norm/div"),
    helper.make_node("Mul", ["xn", "gamma"], ["h"], name="norm/scale"),
    helper.make_node("MatMul", ["h", "w"], ["mm"], name="fc1/MatMul"),
    helper.make_node("Add", ["mm", "b"], ["ab"], name="fc1/Add"),
    helper.make_node("Relu", ["ab"], ["r"], name="fc1/Relu"),
    helper.make_node("Softmax", ["r"], ["y"], name="head/Softmax", axis=-1),
]
graph = helper.make_graph(
    nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 32])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
model.ir_version = 10
onnx.save(model, sys.argv[1])
