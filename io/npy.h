// .npy files: NumPy's format for one array (a magic string, a version, a Python-dict header
// giving dtype, order and shape, then the raw elements). Arguments in numpy's order:
// np.save(file, arr) is save_npy(path, t); np.load(file) is load_npy(path).
//
//   DType   descr   numpy dtype         DType   descr   numpy dtype
//   U8      |u1     uint8               I64     <i8     int64
//   U32     <u4     uint32              F16     <f2     float16
//   I16     <i2     int16               F32     <f4     float32
//   I32     <i4     int32               F64     <f8     float64
//   BF16    |V2     2-byte void holding the raw bfloat16 bits, little-endian
//
// bfloat16: numpy has no such dtype. wick writes the raw bits as a 2-byte void, spelled '|V2'
// as numpy spells it, and reads any 2-byte void ('|V2', or '<V2' as numpy writes an
// ml_dtypes.bfloat16 array) back as BF16. In Python: `np.load(f).view(ml_dtypes.bfloat16)`,
// or with numpy alone `(np.load(f).view('<u2').astype('<u4') << 16).view('<f4')` (exact).
//
// Reading accepts format versions 1.0, 2.0 and 3.0, little- and big-endian descrs, and
// Fortran-order data (returned as a contiguous row-major tensor). Writing produces version
// 1.0 (2.0 when the header is too long for it), C order, little-endian, with the header
// padded so the data starts on a 64-byte boundary, as numpy does. A tensor of any layout or
// device is written in logical order; a file is read whole and checked: its header must
// parse, and the file must hold exactly the bytes the header's dtype and shape call for.
#pragma once
#include <string>

#include "tensor/tensor.h"

namespace wick {

// Writes t to path (created or replaced). Throws wick::Error F01 when the file cannot be written.
void save_npy(const std::string& path, const Tensor& t);

// Reads path into a new contiguous tensor on device. Throws wick::Error (F02..F07) when the
// file cannot be read, is not a .npy file, or holds a dtype wick has no DType for.
Tensor load_npy(const std::string& path, Device device = Device::cpu());

}  // namespace wick
