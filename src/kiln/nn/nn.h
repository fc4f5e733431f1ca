// kiln::nn in one include: Module, the layers, containers, losses, init,
// recurrent layers, attention, gradient clipping and packed sequences, and
// functional (see module.h for how modules hold parameters).
#pragma once

#include "kiln/nn/attention.h"
#include "kiln/nn/container.h"
#include "kiln/nn/functional.h"
#include "kiln/nn/grad_utils.h"
#include "kiln/nn/init.h"
#include "kiln/nn/layers.h"
#include "kiln/nn/loss.h"
#include "kiln/nn/module.h"
#include "kiln/nn/normalization.h"
#include "kiln/nn/rnn.h"
#include "kiln/nn/rnn_modules.h"
#include "kiln/nn/rnn_packed.h"
