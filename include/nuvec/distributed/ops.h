// nuvec: collective operations (MLX's distributed/ops.h) over a Group. With the
// single-process group they are exact identities (the sum, max or gather over one process
// is its own array), as in MLX when the group has size 1.
#pragma once

#include <optional>

#include "nuvec/array.h"
#include "nuvec/distributed/distributed.h"
#include "nuvec/stream.h"

namespace nuvec::distributed {

/// The element-wise sum of x over every process of group (default: init()). Shapes and
/// dtypes: x's. Throws std::invalid_argument for a group nuvec cannot communicate over; over
/// an NCCL group, for a CPU stream (every op here) and for int16 or uint16 (the reductions).
array all_sum(const array& x, std::optional<Group> group = std::nullopt, StreamOrDevice s = {});
/// The element-wise maximum / minimum over the group.
array all_max(const array& x, std::optional<Group> group = std::nullopt, StreamOrDevice s = {});
array all_min(const array& x, std::optional<Group> group = std::nullopt, StreamOrDevice s = {});
/// Every process's x concatenated along axis 0 (rank order): shape (size * x.shape(0), ...).
array all_gather(const array& x, std::optional<Group> group = std::nullopt, StreamOrDevice s = {});
/// The sum over the group, scattered: process r keeps rows [r n / size, (r + 1) n / size).
/// Throws std::invalid_argument when x.shape(0) is not divisible by the group size.
array sum_scatter(const array& x, std::optional<Group> group = std::nullopt, StreamOrDevice s = {});
/// Point-to-point transfers. A group of one process has no peer: both throw
/// std::invalid_argument naming the op.
array send(const array& x, int dst, std::optional<Group> group = std::nullopt, StreamOrDevice s = {});
array recv(Shape shape, Dtype dtype, int src, std::optional<Group> group = std::nullopt, StreamOrDevice s = {});
array recv_like(const array& x, int src, std::optional<Group> group = std::nullopt, StreamOrDevice s = {});

} // namespace nuvec::distributed
