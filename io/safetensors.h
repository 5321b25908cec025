// Reading and writing the safetensors format (the checkpoint format of Hugging Face and
// candle): a name -> Tensor map, plus string metadata, in one file.
//
// The file: 8 bytes holding N, the header's length, as a little-endian u64; N bytes of JSON
// (UTF-8, possibly padded with spaces); then the data section. The JSON object maps each
// tensor's name to {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, offsets
// in bytes into the data section, and may hold "__metadata__": {string: string}. Each
// tensor's bytes are its elements in row-major order, little-endian.
//
// Every wick dtype is written under its own name (U8, U32, I16, I32, I64, BF16, F16, F32,
// F64). Reading accepts those, and BOOL as U8 (0 or 1); any other dtype is refused.
// A malformed file is refused with a wick::Error saying what is wrong (docs/errors.md, F..);
// the reader checks every length and offset against the file before it reads, and the data
// offsets must cover the data section exactly, without gaps or overlaps.
#pragma once
#include <map>
#include <string>

#include "tensor/tensor.h"

namespace wick {

// Writes `tensors` (any layout, dtype and device; copied to the host as needed) and
// `metadata` to path, replacing it. Tensors are stored in name order; the header is padded
// with spaces so the data section starts at a multiple of 8 bytes. The name "__metadata__"
// is reserved.
void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// The tensors of a safetensors file, each a fresh contiguous tensor on `device`.
std::map<std::string, Tensor> load_safetensors(const std::string& path, Device device = Device::cpu());

// The file's "__metadata__" (empty when it has none). Reads and checks only the header.
std::map<std::string, std::string> load_safetensors_metadata(const std::string& path);

}  // namespace wick
