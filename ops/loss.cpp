// Classification losses: nll_loss and cross_entropy (= nll_loss of log_softmax). Built from
// gather, mul and sum, so the backward rules are theirs; the targets are checked on the host,
// where the count of non-ignored targets (the mean's divisor) is also known.
// Gradients:
//   nll_loss:      d/dlog_probs[n, c] = -[c == t_n] / count on rows not ignored, else 0
//   cross_entropy: d/dlogits = (softmax(logits) - one_hot(t)) / count on rows not ignored
#include "ops/op_util.h"

namespace wick {

using namespace ops_detail;

namespace {

// Checks x (N, C) and targets (N) under op's name; returns the targets as a contiguous I64
// tensor on x's device with ignored entries set to 0, the 0/1 weights of the kept rows (x's
// dtype and device), and how many rows are kept.
struct Targets {
  Tensor safe;     // (N, 1) I64
  Tensor weights;  // (N) x's dtype
  size_t count = 0;
};

Targets check_targets(const char* op, const char* what, const Tensor& x, const Tensor& targets,
                      std::optional<int64_t> ignore_index) {
  check_defined(op, x, what);
  check_defined(op, targets, "targets");
  check_same_device(op, x, targets);
  require_float(op, x);
  if (x.rank() != 2)
    throw Error("O30", std::string(op) + ": " + what + " must have shape (N, C), got " + to_string(x.shape()));
  check_index_dtype(op, targets);
  const size_t n = x.dim(0), c = x.dim(1);
  if (targets.rank() != 1 || targets.dim(0) != n)
    throw Error("O31", std::string(op) + ": targets must have shape [" + std::to_string(n) + "] for " + what + " " +
                           to_string(x.shape()) + ", got " + to_string(targets.shape()));
  HostIndices h = host_indices(targets);
  std::vector<int64_t> safe(n);
  std::vector<double> w(n);
  Targets t;
  for (size_t i = 0; i < n; ++i) {
    const int64_t v = h.values[i];
    if (ignore_index && v == *ignore_index) continue;
    if (v < 0 || static_cast<size_t>(v) >= c)
      throw Error("O32", std::string(op) + ": target " + std::to_string(v) + " at position " + std::to_string(i) +
                             " is outside [0, " + std::to_string(c) + ")" +
                             (ignore_index ? " and is not ignore_index " + std::to_string(*ignore_index) : ""));
    safe[i] = v;
    w[i] = 1;
    ++t.count;
  }
  t.safe = Tensor::from_vec(safe, Shape{n, 1}, x.device());
  t.weights = cast(Tensor::from_vec(w, Shape{n}, x.device()), x.dtype());
  return t;
}

// -sum(lp[n, t_n] * w_n) / count
Tensor picked_mean(const Tensor& log_probs, const Targets& t) {
  Tensor picked = gather_checked(log_probs, 1, t.safe).reshape(Shape{log_probs.dim(0)});
  return mul_scalar(sum_all(mul(picked, t.weights)), -1.0 / static_cast<double>(t.count));
}

}  // namespace

Tensor nll_loss(const Tensor& log_probs, const Tensor& targets, std::optional<int64_t> ignore_index) {
  Targets t = check_targets("nll_loss", "log_probs", log_probs, targets, ignore_index);
  return picked_mean(log_probs, t);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, std::optional<int64_t> ignore_index) {
  Targets t = check_targets("cross_entropy", "logits", logits, targets, ignore_index);
  return picked_mean(log_softmax(logits, -1), t);
}

}  // namespace wick
