#!/usr/bin/python3
"""Writes tests/data/quantized_known_answers.h: the packed words, scales and biases that
MLX's quantize gives for a fixed 6 x 128 float32 matrix, for every affine group size and
bit width and for mxfp4, mxfp8 and nvfp4, computed here with NumPy alone (independently of
nuvec) from MLX 0.32's rules:

* affine (mlx/backend/cpu/quantized.cpp `quantize`, mlx/ops.cpp affine_quantize), in
  float32: scale = max((max - min) / (2^bits - 1), 1e-7), negated unless |min| > |max|; the
  edge of larger magnitude (min or max) maps to q0 = rint(edge / scale); when q0 != 0 the
  scale is refit to edge / q0 and the bias is the edge (else the bias is 0);
  q = clip(rint((w - bias) / scale), 0, 2^bits - 1).
* fp modes (mlx/ops.cpp fp_quantize): scale = amax / 6 (4 bits) or / 448 (8 bits) per group;
  mxfp4/mxfp8 store it as E8M0: code = clip(round(log2(scale)), -127, 127) + 127 (a zero
  scale gives exponent 0); nvfp4 as the E4M3 code of the scale (round to nearest even,
  saturating at 448). Values are divided by the decoded scale and rounded to the nearest
  E2M1 (4 bits) or E4M3 (8 bits) value, ties to the even code, saturating at 6 / 448.
* packing: each row is one little-endian bitstream, code j at bits [j*bits, (j+1)*bits),
  bit k of the row being bit k % 32 of word k / 32 (MLX writes 3/5/6-bit codes as 3- or
  5-byte packs, which is the same stream).

The rounding here is written from the number formats (nearest value by search, ties by the
code's parity), not from nuvec's branch tables, so the two implementations check each other.
Run: /usr/bin/python3 tests/data/make_quantized_known_answers.py (rewrites the header).
"""

import os

import numpy as np

ROWS, COLS = 6, 128
F = np.float32


def make_input():
    w = np.zeros((ROWS, COLS), dtype=F)
    j = np.arange(COLS)
    # Dyadic values with one zero: many exact ties in every rounding.
    w[0] = ((j * 37) % 101 - 50).astype(F) / F(16)
    # Non-dyadic values of both signs (correctly rounded float32 divisions).
    w[1] = ((j * 53) % 61 - 30).astype(F) / F(7)
    # A wide dynamic range (down to E4M3's subnormals after scaling) with a few zeros.
    mag = np.ldexp(F(1) + (j % 5).astype(F) / F(8), -(j % 16)).astype(F)
    sign = np.where((j // 3) % 2 == 0, F(1), F(-1))
    w[2] = np.where(j % 29 == 0, F(0), sign * mag).astype(F)
    # Every group equal (a positive constant), every group zero.
    w[3] = F(0.3)
    w[4] = F(0)
    # Negative-dominated rows: the minimum is the edge; one small positive value.
    w[5] = (-(j % 17).astype(F) / F(4) - F(0.1)).astype(F)
    w[5, 77] = F(0.05)
    return w


def pack(codes, bits):
    """Rows of codes (< 2^bits) as little-endian bitstreams of uint32 words."""
    rows = []
    for row in codes:
        stream = 0
        for i, c in enumerate(row):
            stream |= int(c) << (i * bits)
        n_words = len(row) * bits // 32
        rows.append([(stream >> (32 * k)) & 0xFFFFFFFF for k in range(n_words)])
    return np.array(rows, dtype=np.uint64)


def affine(w, group_size, bits):
    n_bins = F((1 << bits) - 1)
    groups = w.reshape(-1, group_size)
    codes = np.zeros(groups.shape, dtype=np.int64)
    scales = np.zeros(len(groups), dtype=F)
    biases = np.zeros(len(groups), dtype=F)
    for g, x in enumerate(groups):
        lo, hi = F(x.min()), F(x.max())
        min_edge = abs(lo) > abs(hi)
        scale = max(F(F(hi - lo) / n_bins), F(1e-7))
        if not min_edge:
            scale = F(-scale)
        edge = lo if min_edge else hi
        q0 = np.rint(F(edge / scale))
        bias = F(0)
        if q0 != 0:
            scale = F(edge / F(q0))
            bias = edge
        q = np.rint(((x - bias).astype(F) / scale).astype(F))
        codes[g] = np.clip(q, 0, n_bins).astype(np.int64)
        scales[g], biases[g] = scale, bias
    return codes.reshape(w.shape), scales.reshape(w.shape[0], -1), biases.reshape(w.shape[0], -1)


# The non-negative values of the element formats, indexed by code (sign bit excluded).
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], dtype=np.float64)


def e4m3_value(code):
    e, m = (code >> 3) & 15, code & 7
    return m * 2.0**-9 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)


E4M3 = np.array([e4m3_value(c) for c in range(0x7F)], dtype=np.float64)  # 0x7f is NaN


def nearest_code(x, table, sign_bit):
    """The code of the table value nearest |x| (ties to the even code; from the table's
    largest value up, that value), with sign_bit set when x is negative (-0 included)."""
    a = abs(float(x))
    if a >= table[-1]:
        code = len(table) - 1
    else:
        hi = int(np.searchsorted(table, a, side="left"))  # table[hi - 1] < a <= table[hi]
        if table[hi] == a:
            code = hi
        else:
            below, above = a - table[hi - 1], table[hi] - a
            if below != above:
                code = hi - 1 if below < above else hi
            else:
                code = hi if hi % 2 == 0 else hi - 1
    return code | (sign_bit if np.signbit(x) else 0)


def fp(w, mode):
    group_size, bits = {"mxfp4": (32, 4), "mxfp8": (32, 8), "nvfp4": (16, 4)}[mode]
    table, sign_bit = (E2M1, 0x8) if bits == 4 else (E4M3, 0x80)
    groups = w.reshape(-1, group_size)
    codes = np.zeros(groups.shape, dtype=np.int64)
    scale_codes = np.zeros(len(groups), dtype=np.int64)
    decoded = np.zeros(groups.shape, dtype=F)
    for g, x in enumerate(groups):
        scale = F(F(np.abs(x).max()) / F(6 if bits == 4 else 448))
        if mode == "nvfp4":
            sc = nearest_code(scale, E4M3, 0x80)
            dec = F(E4M3[sc])
        else:
            if scale == 0:
                e = 0
            else:
                l2 = np.log2(np.float64(scale))
                # Far from a half-integer, so float32 and float64 log2 round alike.
                assert abs(l2 - np.floor(l2) - 0.5) > 1e-3, (mode, g, scale)
                e = int(np.clip(np.round(l2), -127, 127))
            sc = e + 127
            dec = F(2.0**e)
        scale_codes[g] = sc
        y = np.zeros(group_size, dtype=F) if dec == 0 else (x / dec).astype(F)
        codes[g] = [nearest_code(v, table, sign_bit) for v in y]
        mags = np.array([table[c & (sign_bit - 1)] for c in codes[g]])
        signs = np.where(codes[g] & sign_bit, -1.0, 1.0)
        decoded[g] = (signs * mags * np.float64(dec)).astype(F)
    shape = (w.shape[0], -1)
    return codes.reshape(w.shape), scale_codes.reshape(shape), decoded.reshape(w.shape), group_size, bits


def f32_bits(a):
    return np.asarray(a, dtype=F).view(np.uint32).reshape(-1)


def c_array(name, values, per_line=8):
    vals = [f"0x{int(v):08x}u" for v in np.asarray(values).reshape(-1)]
    lines = [", ".join(vals[i : i + per_line]) for i in range(0, len(vals), per_line)]
    body = ",\n    ".join(lines)
    return f"inline constexpr uint32_t {name}[{len(vals)}] = {{\n    {body}}};\n"


def main():
    w = make_input()
    out = []
    cases = []
    worst_affine = 0.0
    for group_size in (32, 64, 128):
        for bits in (2, 3, 4, 5, 6, 8):
            codes, scales, biases = affine(w, group_size, bits)
            tag = f"affine_g{group_size}_b{bits}"
            out.append(c_array(f"k_{tag}_words", pack(codes, bits)))
            out.append(c_array(f"k_{tag}_scales", f32_bits(scales)))
            out.append(c_array(f"k_{tag}_biases", f32_bits(biases)))
            cases.append(f'{{"affine", {group_size}, {bits}, k_{tag}_words, {24 * bits}, k_{tag}_scales, '
                         f"k_{tag}_biases, nullptr, {ROWS * COLS // group_size}}}")
            # Error of the round trip in units of the group's |scale| (clipping can pass 1/2).
            deq = codes * np.repeat(scales, group_size, axis=1) + np.repeat(biases, group_size, axis=1)
            err = np.abs(deq - w) / np.abs(np.repeat(scales, group_size, axis=1))
            worst_affine = max(worst_affine, float(err.max()))
    for mode in ("mxfp4", "mxfp8", "nvfp4"):
        codes, scale_codes, decoded, group_size, bits = fp(w, mode)
        out.append(c_array(f"k_{mode}_words", pack(codes, bits)))
        out.append(c_array(f"k_{mode}_scales", scale_codes))
        out.append(c_array(f"k_{mode}_dequantized", f32_bits(decoded)))
        cases.append(f'{{"{mode}", {group_size}, {bits}, k_{mode}_words, {24 * bits}, k_{mode}_scales, '
                     f"nullptr, k_{mode}_dequantized, {ROWS * COLS // group_size}}}")
    header = [
        "// Generated by tests/data/make_quantized_known_answers.py (NumPy, MLX 0.32's rules);",
        "// do not edit. The input matrix and, per format, the packed words, the scales (float32",
        "// bits for affine, uint8 codes for the fp modes), the affine biases (float32 bits) and",
        "// the fp modes' dequantized values (float32 bits).",
        f"// Largest affine round-trip error in the table: {worst_affine:.4f} |scale|.",
        "#pragma once",
        "",
        "#include <cstdint>",
        "",
        "namespace nuvec::testing::quantized_known_answers {",
        "",
        f"inline constexpr int kRows = {ROWS};",
        f"inline constexpr int kCols = {COLS};",
        "/// The input, row-major, as float32 bits.",
        c_array("kInput", f32_bits(w)),
    ]
    text = "\n".join(header) + "\n" + "\n".join(out)
    text += (
        "\n/// One format's expected output. words: kRows * kCols * bits / 32; scales and biases\n"
        "/// (affine) or dequantized (fp modes, kRows * kCols values): n_groups entries.\n"
        "struct Case {\n  const char* mode;\n  int group_size;\n  int bits;\n  const uint32_t* words;\n"
        "  int n_words;\n  const uint32_t* scales;\n  const uint32_t* biases;\n"
        "  const uint32_t* dequantized;\n  int n_groups;\n};\n\n"
        f"inline constexpr Case kCases[{len(cases)}] = {{\n    " + ",\n    ".join(cases) + "};\n\n"
        "} // namespace nuvec::testing::quantized_known_answers\n"
    )
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "quantized_known_answers.h")
    with open(path, "w") as f:
        f.write(text)
    print(f"wrote {path}: {len(cases)} cases; worst affine round-trip error {worst_affine:.4f} |scale|")


if __name__ == "__main__":
    main()
