"""MobileNetV3-Small in torchvision's layer layout
(torchvision/models/mobilenetv3.py, arch "mobilenet_v3_small", width 1.0,
no reduced tail, no dilation; torchvision/ops/misc.py's
Conv2dNormActivation and SqueezeExcitation), written against an `nn`
namespace (torch.nn or kiln.nn). Module names and order equal torchvision's
(features.<i>.block.<j>.<k>, avgpool, classifier.<i>), so torchvision's
state_dict loads into either."""

# (input channels, kernel, expanded channels, output channels, squeeze-
# excitation, activation: "RE" ReLU or "HS" hardswish, stride): torchvision's
# _mobilenet_v3_conf for mobilenet_v3_small.
SMALL = [(16, 3, 16, 16, True, "RE", 2), (16, 3, 72, 24, False, "RE", 2),
         (24, 3, 88, 24, False, "RE", 1), (24, 5, 96, 40, True, "HS", 2),
         (40, 5, 240, 40, True, "HS", 1), (40, 5, 240, 40, True, "HS", 1),
         (40, 5, 120, 48, True, "HS", 1), (48, 5, 144, 48, True, "HS", 1),
         (48, 5, 288, 96, True, "HS", 2), (96, 5, 576, 96, True, "HS", 1),
         (96, 5, 576, 96, True, "HS", 1)]
LAST_CHANNEL = 1024


def make_divisible(v, divisor=8, min_value=None):
    """torchvision's _make_divisible (from the TensorFlow original)."""
    min_value = min_value or divisor
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * v else new_v


def mobilenet_v3_small(nn, num_classes=1000):
    def batch_norm(channels):  # torchvision: partial(nn.BatchNorm2d, eps=0.001, momentum=0.01)
        return nn.BatchNorm2d(channels, eps=0.001, momentum=0.01)

    def conv_norm_activation(cin, cout, kernel=3, stride=1, groups=1, activation=nn.ReLU):
        """torchvision.ops.Conv2dNormActivation: a Sequential conv (no bias),
        batch norm, activation (inplace=True), or no activation."""
        layers = [nn.Conv2d(cin, cout, kernel, stride, (kernel - 1) // 2, groups=groups,
                            bias=False), batch_norm(cout)]
        if activation is not None:
            layers.append(activation(inplace=True))
        return nn.Sequential(*layers)

    class SqueezeExcitation(nn.Module):
        """torchvision.ops.SqueezeExcitation(scale_activation=nn.Hardsigmoid)."""

        def __init__(self, input_channels, squeeze_channels):
            super().__init__()
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.fc1 = nn.Conv2d(input_channels, squeeze_channels, 1)
            self.fc2 = nn.Conv2d(squeeze_channels, input_channels, 1)
            self.activation = nn.ReLU()
            self.scale_activation = nn.Hardsigmoid()

        def forward(self, x):
            scale = self.fc2(self.activation(self.fc1(self.avgpool(x))))
            return self.scale_activation(scale) * x

    class InvertedResidual(nn.Module):
        def __init__(self, cin, kernel, expanded, cout, use_se, activation, stride):
            super().__init__()
            self.use_res_connect = stride == 1 and cin == cout
            act = nn.Hardswish if activation == "HS" else nn.ReLU
            layers = []
            if expanded != cin:
                layers.append(conv_norm_activation(cin, expanded, 1, activation=act))
            layers.append(conv_norm_activation(expanded, expanded, kernel, stride,
                                               groups=expanded, activation=act))
            if use_se:
                layers.append(SqueezeExcitation(expanded, make_divisible(expanded // 4)))
            layers.append(conv_norm_activation(expanded, cout, 1, activation=None))
            self.block = nn.Sequential(*layers)

        def forward(self, x):
            result = self.block(x)
            if self.use_res_connect:
                result += x
            return result

    class MobileNetV3(nn.Module):
        def __init__(self):
            super().__init__()
            layers = [conv_norm_activation(3, SMALL[0][0], 3, 2, activation=nn.Hardswish)]
            layers += [InvertedResidual(*config) for config in SMALL]
            last_in = SMALL[-1][3]
            layers.append(conv_norm_activation(last_in, 6 * last_in, 1,
                                               activation=nn.Hardswish))
            self.features = nn.Sequential(*layers)
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.classifier = nn.Sequential(
                nn.Linear(6 * last_in, LAST_CHANNEL), nn.Hardswish(inplace=True),
                nn.Dropout(p=0.2, inplace=True), nn.Linear(LAST_CHANNEL, num_classes))

        def forward(self, x):
            x = self.avgpool(self.features(x))
            x = x.flatten(1)  # torchvision: torch.flatten(x, 1)
            return self.classifier(x)

    return MobileNetV3()


# Multiply-adds x 2 at 224 x 224: torchvision lists 0.06 GMACs (56.5 M).
FLOPS_PER_IMAGE = 2 * 0.0565e9
