"""The models bench/real_models.py times, each written once against an `nn`
namespace so that the same code builds the torch.nn and the kiln.nn twin
(`build(torch.nn)`, `build(kiln.nn)`): the layers, their names and their
order are one definition, so a state_dict of one loads into the other.

- transformer.py: SCENARIOS.md's W5, 4 x TransformerEncoderLayer(384, 6,
  1536, gelu, batch_first).
- resnet.py, mobilenet_v3.py: W6, ResNet-18 and MobileNetV3-Small in
  torchvision's layer layout (torchvision is not a dependency: the
  architectures are written out here, following torchvision 0.20's
  torchvision/models/resnet.py and mobilenetv3.py and ops/misc.py).
- weights.py: the torch side's weights (seeded), batch-norm statistics
  calibrated on a batch so eval mode is not a near-identity.
- onnx_zoo.py: the pretrained ONNX models from PyPI packages and the inputs
  they are timed on.

No module here imports torch or kiln at import time: a process that times
one framework loads only that framework.
"""
