# Writes the NumPy-made .npz files that tests/io_archive_test.cpp reads (run with Debian's
# /usr/bin/python3, which has numpy): numpy_stored.npz (numpy.savez) and
# numpy_compressed.npz (numpy.savez_compressed), the same arrays in both. Every value is a
# formula of its flat index i, which the test recomputes.
import os
import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
i = lambda n: np.arange(n)
arrays = {
    "f32": ((i(6) * 0.5 - 1.25).astype(np.float32)).reshape(2, 3),
    "f64": (i(5) / 3.0).astype(np.float64),
    "f16": (i(4) * 0.25).astype(np.float16).reshape(2, 2),
    "i8": (i(7) - 3).astype(np.int8),
    "i16": (i(6) * -300).astype(np.int16).reshape(3, 2),
    "i32": (i(24) * 1000 - 7).astype(np.int32).reshape(2, 3, 4),
    "i64": (i(3) * 10**12).astype(np.int64),
    "u8": (i(5) * 50).astype(np.uint8),
    "u16": (i(4) * 16000).astype(np.uint16),
    "u32": (i(3) * 2**30).astype(np.uint32),
    "u64": (i(2) * 2**62).astype(np.uint64),
    "b": (i(5) % 2 == 0),
    "scalar": np.float32(2.5).reshape(()),
    "empty": np.zeros((0, 3), np.float32),
    "fortran": np.asfortranarray((i(6) + 1).astype(np.int32).reshape(2, 3)),
}
np.savez(os.path.join(here, "numpy_stored.npz"), **arrays)
np.savez_compressed(os.path.join(here, "numpy_compressed.npz"), **arrays)
