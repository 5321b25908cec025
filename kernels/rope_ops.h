// The rotary position embedding of one element, shared by the CPU loop in ops/rope.cpp and
// the CUDA kernel in kernels/rope.cu. Element c of a row of head_dim elements is rotated
// with its partner in pair p (c < rotary_dim) or passed through (c >= rotary_dim):
//   half rotation: pair p = (p, p + rotary_dim / 2)     interleaved: pair p = (2p, 2p + 1)
//   angle = position * base^(-2p / rotary_dim), in f64
//   (a, b) -> (a cos - b sin, a sin + b cos); the inverse rotation negates sin.
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/common.h"

namespace wick::kernels {

struct RopeParams {
  int64_t rows = 0;        // number of positions
  int64_t row_len = 0;     // elements per position (heads * head_dim, or head_dim)
  int64_t head_dim = 0;    // the last dim
  int64_t rotary_dim = 0;  // even, <= head_dim
  double base = 10000.0;
  bool interleaved = false;
  bool inverse = false;    // rotate by -angle (the backward)
};

// y for element c of a row at `position`, given the row's elements through get(k).
template <class C, class Get>
WICK_HOST_DEVICE C rope_element(const RopeParams& p, int64_t c, int64_t position, Get&& get) {
  if (c >= p.rotary_dim) return get(c);
  const int64_t half = p.rotary_dim / 2;
  int64_t pair, partner;
  bool first;
  if (p.interleaved) {
    pair = c / 2;
    first = c % 2 == 0;
    partner = first ? c + 1 : c - 1;
  } else {
    first = c < half;
    pair = first ? c : c - half;
    partner = first ? c + half : c - half;
  }
  const double inv_freq = ::pow(p.base, -2.0 * static_cast<double>(pair) / static_cast<double>(p.rotary_dim));
  const double angle = static_cast<double>(position) * inv_freq;
  const C cs = static_cast<C>(::cos(angle));
  const C sn = static_cast<C>(p.inverse ? -::sin(angle) : ::sin(angle));
  // first: a cos - b sin (a = this, b = partner); second: b sin + a cos (b = partner = a of the pair)
  return first ? get(c) * cs - get(partner) * sn : get(partner) * sn + get(c) * cs;
}

}  // namespace wick::kernels
