// nuvec: the primitive families, published in include/nuvec/primitive_families.h (MLX's
// primitives.h is public too: its tests build nodes by hand).
#pragma once

#include "nuvec/primitive_families.h"
