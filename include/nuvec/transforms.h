// nuvec: evaluation and the function transforms (MLX's transforms.h API; the algorithms follow
// MLX's transforms.cpp, shared/seeds/004_*.txt, made iterative so graph depth never becomes
// stack depth).
#pragma once

#include <functional>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "nuvec/array.h"

namespace nuvec {

/// Schedules the graphs of outputs for evaluation and returns without waiting. Throws
/// std::invalid_argument inside a transform.
void async_eval(std::vector<array> outputs);

/// async_eval of arrays given as separate arguments: `async_eval(a, b)` (MLX's variadic form).
template <typename... Arrays, typename = std::enable_if_t<(std::is_same_v<std::decay_t<Arrays>, array> && ...)>>
void async_eval(Arrays&&... outputs) {
  async_eval(std::vector<array>{std::forward<Arrays>(outputs)...});
}

/// Evaluates the graphs of outputs and waits for the results. Nodes are ordered into a tape
/// (breadth first, with a width limit), each runs on its stream's worker, and streams wait
/// on each other through events. While active memory is over the memory limit, scheduling
/// waits for work in flight.
void eval(std::vector<array> outputs);

/// eval of arrays given as separate arguments: `eval(a, b, c)`.
template <typename... Arrays, typename = std::enable_if_t<(std::is_same_v<std::decay_t<Arrays>, array> && ...)>>
void eval(Arrays&&... outputs) {
  eval(std::vector<array>{std::forward<Arrays>(outputs)...});
}

/// Reverse mode: the outputs of fun at primals and the vector-Jacobian products of the
/// cotangents (one per output not cut by stop_gradient; shapes must match the outputs).
/// Throws std::invalid_argument on mismatched counts or shapes.
std::pair<std::vector<array>, std::vector<array>> vjp(
    const std::function<std::vector<array>(const std::vector<array>&)>& fun,
    const std::vector<array>& primals,
    const std::vector<array>& cotangents);
std::pair<array, array> vjp(
    const std::function<array(const array&)>& fun,
    const array& primal,
    const array& cotangent);

/// Forward mode: the outputs of fun at primals and the Jacobian-vector products of the
/// tangents (one per primal, same shapes).
std::pair<std::vector<array>, std::vector<array>> jvp(
    const std::function<std::vector<array>(const std::vector<array>&)>& fun,
    const std::vector<array>& primals,
    const std::vector<array>& tangents);
std::pair<array, array> jvp(
    const std::function<array(const array&)>& fun,
    const array& primal,
    const array& tangent);

using ValueAndGradFn = std::function<std::pair<std::vector<array>, std::vector<array>>(
    const std::vector<array>&)>;
using SimpleValueAndGradFn = std::function<std::pair<array, std::vector<array>>(
    const std::vector<array>&)>;

/// fun's outputs and the gradient of its first output (a scalar) with respect to the
/// arguments in argnums (other outputs are returned without gradient). Throws
/// std::invalid_argument for empty, repeated or out-of-range argnums.
ValueAndGradFn value_and_grad(
    const std::function<std::vector<array>(const std::vector<array>&)>& fun,
    const std::vector<int>& argnums);
ValueAndGradFn value_and_grad(
    const std::function<std::vector<array>(const std::vector<array>&)>& fun,
    int argnum = 0);
std::function<std::pair<array, array>(const array&)> value_and_grad(
    const std::function<array(const array&)>& fun);
SimpleValueAndGradFn value_and_grad(
    const std::function<array(const std::vector<array>&)>& fun,
    const std::vector<int>& argnums);
SimpleValueAndGradFn value_and_grad(
    const std::function<array(const std::vector<array>&)>& fun,
    int argnum = 0);

/// The gradient of a scalar function with respect to the arguments in argnums.
std::function<std::vector<array>(const std::vector<array>&)> grad(
    const std::function<array(const std::vector<array>&)>& fun,
    const std::vector<int>& argnums);
std::function<std::vector<array>(const std::vector<array>&)> grad(
    const std::function<array(const std::vector<array>&)>& fun,
    int argnum = 0);
std::function<array(const array&)> grad(const std::function<array(const array&)>& fun);

/// fun mapped over axis in_axes[i] of input i (-1: not mapped), outputs stacked on
/// out_axes (default 0 everywhere). Throws std::invalid_argument for inconsistent axis
/// sizes or axes out of range.
std::function<std::vector<array>(const std::vector<array>&)> vmap(
    const std::function<std::vector<array>(const std::vector<array>&)>& fun,
    const std::vector<int>& in_axes = {},
    const std::vector<int>& out_axes = {});
std::function<array(const array&, const array&)> vmap(
    const std::function<array(const array&, const array&)>& fun,
    int in_axis_a = 0,
    int in_axis_b = 0,
    int out_axis = 0);
std::function<array(const array&)> vmap(
    const std::function<array(const array&)>& fun,
    int in_axis = 0,
    int out_axis = 0);

/// fun with its own vjp, jvp and/or vmap rules (missing ones are derived from fun).
/// fun_vjp(primals, cotangents, outputs) returns one cotangent per primal;
/// fun_jvp(primals, tangents, argnums) one tangent per output;
/// fun_vmap(inputs, axes) the outputs and their batch axes.
std::function<std::vector<array>(const std::vector<array>&)> custom_function(
    std::function<std::vector<array>(const std::vector<array>&)> fun,
    std::optional<std::function<std::vector<array>(
        const std::vector<array>&,
        const std::vector<array>&,
        const std::vector<array>&)>> fun_vjp = std::nullopt,
    std::optional<std::function<std::vector<array>(
        const std::vector<array>&,
        const std::vector<array>&,
        const std::vector<int>&)>> fun_jvp = std::nullopt,
    std::optional<std::function<std::pair<std::vector<array>, std::vector<int>>(
        const std::vector<array>&,
        const std::vector<int>&)>> fun_vmap = std::nullopt);

/// fun with a custom vjp (custom_function with only fun_vjp).
std::function<std::vector<array>(const std::vector<array>&)> custom_vjp(
    std::function<std::vector<array>(const std::vector<array>&)> fun,
    std::function<std::vector<array>(
        const std::vector<array>&,
        const std::vector<array>&,
        const std::vector<array>&)> fun_vjp);

/// fun whose intermediates are recomputed during the backward pass instead of kept
/// (gradient checkpointing).
std::function<std::vector<array>(const std::vector<array>&)> checkpoint(
    std::function<std::vector<array>(const std::vector<array>&)> fun);

namespace detail {
/// vjp restricted to the primals in argnums (sorted), as value_and_grad uses it.
std::pair<std::vector<array>, std::vector<array>> vjp(
    const std::function<std::vector<array>(const std::vector<array>&)>& fun,
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums);
} // namespace detail

} // namespace nuvec
