// `wick attn`: the operator on .npy inputs; writes out and lse as .npy.
#include <algorithm>
#include <cmath>
#include <iomanip>

#include "io/npy.h"
#include "ops/attention/reference.h"
#include "tools/catalog.h"
#include "tools/commands.h"

namespace wick::cli {

namespace {

Tensor cumulative(const std::vector<size_t>& lens, Device dev) {
  std::vector<uint32_t> cu{0};
  for (size_t n : lens) cu.push_back(cu.back() + static_cast<uint32_t>(n));
  return Tensor::from_vec(cu, {cu.size()}, dev);
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  std::vector<double> x = a.to_f64_vec(), y = b.to_f64_vec();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

// The accuracy bar: max |out - ref| <= 2 max |ref_input - ref| + 1e-5, where ref is the f32
// reference and ref_input the reference rounded like a computation in the input dtype.
template <class Op>
int check(const Op& op, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, std::ostream& os) {
  Tensor ref = attention_reference(op, q, k, v, ReferencePrecision::F32);
  Tensor naive = attention_reference(op, q, k, v, ReferencePrecision::Input);
  const double err = max_abs_diff(out, ref), bar = 2 * max_abs_diff(naive, ref) + 1e-5;
  os << std::scientific << std::setprecision(3) << "check: max |out - reference| = " << err
     << ", bar (2 x same-precision reference error + 1e-5) = " << bar << std::defaultfloat << ": "
     << (err <= bar ? "ok" : "FAILED") << "\n";
  return err <= bar ? 0 : 3;
}

}  // namespace

int attn(const AttnOptions& opt, std::ostream& os) {
  try {
    const Device dev = opt.device == "cuda" ? Device::cuda(0) : Device::cpu();
    Tensor q = load_npy(opt.q, dev), k = load_npy(opt.k, dev), v = load_npy(opt.v, dev);
    os << "q " << to_string(q.shape()) << " " << dtype_name(q.dtype()) << ", k " << to_string(k.shape()) << ", v "
       << to_string(v.shape()) << " on " << to_string(dev) << "\n";
    Tensor out, lse;
    int status = 0;
    if (opt.seqlens_q.empty() && opt.seqlens_k.empty()) {
      FlashAttn op;
      op.softmax_scale = opt.scale, op.window_size_left = opt.window_left, op.window_size_right = opt.window_right;
      op.softcap = opt.softcap, op.causal = opt.causal;
      std::tie(out, lse) = op.forward_with_lse(q, k, v);
      if (opt.check) status = check(op, q, k, v, out, os);
    } else {
      FlashAttnVarLen op;
      const std::vector<size_t>& lq = opt.seqlens_q.empty() ? opt.seqlens_k : opt.seqlens_q;
      const std::vector<size_t>& lk = opt.seqlens_k.empty() ? opt.seqlens_q : opt.seqlens_k;
      op.seqlens_q = cumulative(lq, dev), op.seqlens_k = cumulative(lk, dev);
      op.max_seqlen_q = lq.empty() ? 0 : *std::max_element(lq.begin(), lq.end());
      op.max_seqlen_k = lk.empty() ? 0 : *std::max_element(lk.begin(), lk.end());
      op.softmax_scale = opt.scale, op.window_size_left = opt.window_left, op.window_size_right = opt.window_right;
      op.softcap = opt.softcap, op.causal = opt.causal;
      if (!opt.block_table.empty()) {
        op.block_table = load_npy(opt.block_table, dev);
        op.page_block_size = opt.page_block_size.value_or(k.rank() == 4 ? k.dim(1) : 0);
      }
      std::tie(out, lse) = op.forward_with_lse(q, k, v);
      if (opt.check) status = check(op, q, k, v, out, os);
    }
    save_npy(opt.out, out);
    save_npy(opt.lse, lse);
    os << "wrote " << opt.out << " " << to_string(out.shape()) << " " << dtype_name(out.dtype()) << " and " << opt.lse
       << " " << to_string(lse.shape()) << " F32\n";
    return status;
  } catch (const Error& e) {
    os << errors_doc::explain(e);
    return 1;
  }
}

}  // namespace wick::cli
