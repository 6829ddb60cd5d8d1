// nuvec::nn: neural-network building blocks (MLX's mlx.nn in C++): the Module tree, layers,
// activations, losses, quantized layers, data- and tensor-parallel helpers (nn/distributed.h)
// and the nn generator. Built on nuvec's public API only.
#pragma once

#include "nuvec/nn/activations.h"
#include "nuvec/nn/distributed.h"
#include "nuvec/nn/init.h"
#include "nuvec/nn/layers.h"
#include "nuvec/nn/losses.h"
#include "nuvec/nn/module.h"
#include "nuvec/nn/quantized.h"
