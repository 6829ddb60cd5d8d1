// nuvec: einsum and einsum_path (MLX's einsum.h). They are declared with the other ops in
// nuvec/ops.h; this header exists so that `#include "mlx/einsum.h"` maps to one of ours.
#pragma once

#include "nuvec/ops.h"
