// kiln's C++ API in one include: tensors, factories, every op, autograd, nn
// the training kit (optimizers, schedulers, datasets, loaders, progress bar)
// kiln::jit (trace, hybridize, the graph IR's text form, saving and loading
// .kiln model files), kiln::io (safetensors state dicts, .npy files) and
// kiln::onnx (ONNX export and import).
//
//   #include <kiln/kiln.h>
//   auto x = kiln::randn({1, 512});
//   auto y = kiln::relu(kiln::linear(x, w, b));
//   std::cout << y << "\n";
#pragma once

#include "kiln/autograd/autograd.h"
#include "kiln/core/factory.h"
#include "kiln/core/tensor.h"
#include "kiln/data/dataloader.h"
#include "kiln/data/dataset.h"
#include "kiln/data/datasets.h"
#include "kiln/data/progress.h"
#include "kiln/io/model_file.h"
#include "kiln/io/npy.h"
#include "kiln/io/safetensors.h"
#include "kiln/jit/compile/hybridize.h"
#include "kiln/jit/compile/trace.h"
#include "kiln/jit/ir/parser.h"
#include "kiln/jit/ir/printer.h"
#include "kiln/nn/nn.h"
#include "kiln/onnx/onnx_export.h"
#include "kiln/onnx/onnx_import.h"
#include "kiln/onnx/onnx_model.h"
#include "kiln/ops/conv_pool.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/data_dependent.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/einsum.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/mask.h"
#include "kiln/ops/nn.h"
#include "kiln/ops/random.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/repeat.h"
#include "kiln/ops/scan.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/sort.h"
#include "kiln/ops/view.h"
#include "kiln/optim/adam.h"
#include "kiln/optim/adam_variants.h"
#include "kiln/optim/functional.h"
#include "kiln/optim/optimizer.h"
#include "kiln/optim/rmsprop.h"
#include "kiln/optim/scheduler.h"
#include "kiln/optim/sgd.h"
#include "kiln/profiler/profiler.h"
