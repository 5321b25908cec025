// A gradient check for every differentiable op in ops/ops.h and every view: the analytic
// backward rule against central finite differences in f64 on the CPU, and (on a GPU) the
// CUDA f32 gradients against the CPU f64 ones. The analytic derivative each rule should
// implement is written beside its case. Inputs are random (seeded), kept away from kinks.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "autograd/autograd.h"
#include "ops/ops.h"
#include "tests/devices.h"

using namespace wick;
using autograd::GradcheckFn;

namespace {

struct OpCase {
  std::string name;
  GradcheckFn f;
  std::vector<Tensor> inputs;
  double eps = 1e-6;
  double tol = 1e-6;
  bool cuda = true;  // also run the CUDA f32 vs CPU f64 comparison
};

using In = std::vector<Tensor>;

Tensor rnd(const Shape& s, uint64_t seed) { return Tensor::randn(s, DType::F64, Device::cpu(), seed); }

// Random values with |x| >= 0.2, for rules with a kink or a pole at 0 (relu, div).
Tensor away_from_zero(const Shape& s, uint64_t seed) {
  std::vector<double> v = rnd(s, seed).to_f64_vec();
  for (double& e : v) e = e >= 0 ? e + 0.2 : e - 0.2;
  return Tensor::from_vec(v, s, Device::cpu());
}

// Random positive values in [0.5, 2.5), for log, sqrt, powf.
Tensor positive(const Shape& s, uint64_t seed) {
  std::vector<double> v = rnd(s, seed).to_f64_vec();
  for (double& e : v) e = 0.5 + std::fmod(std::fabs(e), 2.0);
  return Tensor::from_vec(v, s, Device::cpu());
}

// Index or mask values on the device of `like` (inputs move to the GPU in the CUDA check).
template <class T>
Tensor ints_on(const Tensor& like, const std::vector<T>& values, const Shape& s) {
  return Tensor::from_vec(values, s, Device::cpu()).to_device(like.device());
}

std::vector<OpCase> unary_cases() {
  Shape s{2, 3};
  return {
      {"neg", [](const In& x) { return neg(x[0]); }, {rnd(s, 1)}},                  // -1
      {"exp", [](const In& x) { return exp(x[0]); }, {rnd(s, 2)}},                  // exp(x)
      {"log", [](const In& x) { return log(x[0]); }, {positive(s, 3)}},             // 1 / x
      {"sqrt", [](const In& x) { return sqrt(x[0]); }, {positive(s, 4)}},           // 1 / (2 sqrt x)
      {"tanh", [](const In& x) { return tanh(x[0]); }, {rnd(s, 5)}},                // 1 - tanh^2 x
      {"relu", [](const In& x) { return relu(x[0]); }, {away_from_zero(s, 6)}},     // x > 0 ? 1 : 0
      // u = c (x + 0.044715 x^3), c = sqrt(2/pi):
      // 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) c (1 + 3 * 0.044715 x^2)
      {"gelu", [](const In& x) { return gelu(x[0]); }, {rnd(s, 7)}},
      {"silu", [](const In& x) { return silu(x[0]); }, {rnd(s, 8)}},                // s(x) (1 + x (1 - s(x)))
      {"sigmoid", [](const In& x) { return sigmoid(x[0]); }, {rnd(s, 9)}},          // s(x) (1 - s(x))
      {"affine", [](const In& x) { return affine(x[0], -1.5, 0.25); }, {rnd(s, 10)}},  // mul = -1.5
      {"add_scalar", [](const In& x) { return add_scalar(x[0], 3.0); }, {rnd(s, 11)}},  // 1
      {"mul_scalar", [](const In& x) { return mul_scalar(x[0], 0.7); }, {rnd(s, 12)}},  // 0.7
      {"powf 2.5", [](const In& x) { return powf(x[0], 2.5); }, {positive(s, 13)}},     // 2.5 x^1.5
      {"powf 3", [](const In& x) { return powf(x[0], 3.0); }, {positive(s, 14)}},       // 3 x^2
      {"operator- (unary)", [](const In& x) { return -x[0]; }, {rnd(s, 15)}},           // -1
      {"operator+ scalar", [](const In& x) { return x[0] + 2.0; }, {rnd(s, 16)}},       // 1
      {"operator- scalar", [](const In& x) { return x[0] - 2.0; }, {rnd(s, 17)}},       // 1
      {"operator* scalar", [](const In& x) { return x[0] * -3.0; }, {rnd(s, 18)}},      // -3
      {"operator/ scalar", [](const In& x) { return x[0] / 4.0; }, {rnd(s, 19)}},       // 1/4
  };
}

std::vector<OpCase> binary_cases() {
  return {
      // d/da = 1, d/db = 1; broadcasting sums the gradient over the broadcast dims
      {"add same shape", [](const In& x) { return add(x[0], x[1]); }, {rnd({2, 3}, 20), rnd({2, 3}, 21)}},
      {"add (2,3)+(3)", [](const In& x) { return add(x[0], x[1]); }, {rnd({2, 3}, 22), rnd({3}, 23)}},
      {"add (2,1)+(1,3)", [](const In& x) { return add(x[0], x[1]); }, {rnd({2, 1}, 24), rnd({1, 3}, 25)}},
      // d/da = 1, d/db = -1
      {"sub (4,1,3)-(2,3)", [](const In& x) { return sub(x[0], x[1]); }, {rnd({4, 1, 3}, 26), rnd({2, 3}, 27)}},
      // d/da = b, d/db = a
      {"mul (2,3,4)*(3,1)", [](const In& x) { return mul(x[0], x[1]); }, {rnd({2, 3, 4}, 28), rnd({3, 1}, 29)}},
      {"mul x*x (one input twice)", [](const In& x) { return mul(x[0], x[0]); }, {rnd({5}, 30)}},  // 2x
      // d/da = 1/b, d/db = -a/b^2
      {"div (2,3)/(3)", [](const In& x) { return div(x[0], x[1]); }, {rnd({2, 3}, 31), away_from_zero({3}, 32)}},
      // d/da = a > b, d/db = a < b (independent random inputs: no ties)
      {"maximum", [](const In& x) { return maximum(x[0], x[1]); }, {rnd({2, 3}, 33), rnd({2, 3}, 34)}},
      {"minimum (2,3),(1,3)", [](const In& x) { return minimum(x[0], x[1]); }, {rnd({2, 3}, 35), rnd({1, 3}, 36)}},
      // operators: as add/sub/mul/div
      {"operator+", [](const In& x) { return x[0] + x[1]; }, {rnd({3}, 37), rnd({3}, 38)}},
      {"operator-", [](const In& x) { return x[0] - x[1]; }, {rnd({3}, 39), rnd({3}, 40)}},
      {"operator*", [](const In& x) { return x[0] * x[1]; }, {rnd({3}, 41), rnd({3}, 42)}},
      {"operator/", [](const In& x) { return x[0] / x[1]; }, {rnd({3}, 43), away_from_zero({3}, 44)}},
      // d/da = cond, d/db = !cond, broadcast over cond's shape (2,3)
      {"where", [](const In& x) {
         Tensor cond = ints_on<uint8_t>(x[0], {1, 0, 1, 0, 0, 1}, {2, 3});
         return where(cond, x[0], x[1]);
       },
       {rnd({2, 3}, 45), rnd({3}, 46)}},
  };
}

std::vector<OpCase> reduce_cases() {
  Shape s{2, 3, 4};
  return {
      // d sum / dx = 1 at every reduced element (the gradient broadcast back)
      {"sum dims {1}", [](const In& x) { return sum(x[0], {1}); }, {rnd(s, 50)}},
      {"sum dims {0,2} keepdim", [](const In& x) { return sum(x[0], {0, 2}, true); }, {rnd(s, 51)}},
      // 1 / (number of reduced elements)
      {"mean dims {2}", [](const In& x) { return mean(x[0], {2}); }, {rnd(s, 52)}},
      {"mean dims {0,1} keepdim", [](const In& x) { return mean(x[0], {0, 1}, true); }, {rnd(s, 53)}},
      // 1 at the arg max / arg min (random values: no ties), 0 elsewhere
      {"max dims {1}", [](const In& x) { return max(x[0], {1}); }, {rnd(s, 54)}},
      {"min dims {2} keepdim", [](const In& x) { return min(x[0], {2}, true); }, {rnd(s, 55)}},
      {"sum_all", [](const In& x) { return sum_all(x[0]); }, {rnd(s, 56)}},    // 1
      {"mean_all", [](const In& x) { return mean_all(x[0]); }, {rnd(s, 57)}},  // 1 / 24
      // the gradient of (2,3,4) -> (3,1) is the (3,1) gradient broadcast back
      {"sum_to (2,3,4)->(3,1)", [](const In& x) { return sum_to(x[0], {3, 1}); }, {rnd(s, 58)}},
  };
}

std::vector<OpCase> softmax_norm_cases() {
  return {
      // s = softmax(x): dx = s * (g - sum(g * s, last dim))
      {"softmax", [](const In& x) { return softmax(x[0]); }, {rnd({2, 3, 5}, 60)}},
      // dx = g - softmax(x) * sum(g, last dim)
      {"log_softmax", [](const In& x) { return log_softmax(x[0]); }, {rnd({4, 6}, 61)}},
      {"softmax of a transposed view", [](const In& x) { return softmax(x[0].transpose(0, 1)); }, {rnd({5, 3}, 62)}},
      // r = 1/sqrt(mean(x^2) + eps), y = x r w: dx = r w g - x r^3 mean(x w g), dw = sum_rows(x r g)
      {"rms_norm", [](const In& x) { return rms_norm(x[0], x[1], 1e-5); }, {rnd({3, 4}, 63), rnd({4}, 64)}},
      // xh = (x - mu) r, r = 1/sqrt(var + eps): dx = r (gw - mean(gw) - xh mean(gw xh)),
      // dw = sum_rows(g xh), db = sum_rows(g)
      {"layer_norm", [](const In& x) { return layer_norm(x[0], x[1], x[2], 1e-5); },
       {rnd({2, 3, 5}, 65), rnd({5}, 66), rnd({5}, 67)}},
  };
}

std::vector<OpCase> matmul_gather_cases() {
  return {
      // C = A B: dA = G B^T, dB = A^T G (batch dims summed where broadcast)
      {"matmul (3,4)x(4,5)", [](const In& x) { return matmul(x[0], x[1]); }, {rnd({3, 4}, 70), rnd({4, 5}, 71)}},
      {"matmul (2,3,4)x(4,5) broadcast rhs", [](const In& x) { return matmul(x[0], x[1]); },
       {rnd({2, 3, 4}, 72), rnd({4, 5}, 73)}},
      {"matmul (2,1,3,4)x(3,4,2)", [](const In& x) { return matmul(x[0], x[1]); },
       {rnd({2, 1, 3, 4}, 74), rnd({3, 4, 2}, 75)}},
      {"matmul of transposed views", [](const In& x) { return matmul(x[0].t(), x[1].t()); },
       {rnd({4, 3}, 76), rnd({5, 4}, 77)}},
      // each input receives its slice of the gradient
      {"cat dim 1", [](const In& x) { return cat({x[0], x[1]}, 1); }, {rnd({2, 3}, 78), rnd({2, 2}, 79)}},
      {"cat dim 0, three inputs", [](const In& x) { return cat({x[0], x[1], x[0]}, 0); },
       {rnd({1, 3}, 80), rnd({2, 3}, 81)}},
      // dx[indices[j]] += g[j] (repeated indices accumulate)
      {"index_select dim 0", [](const In& x) {
         return index_select(x[0], ints_on<int64_t>(x[0], {2, 0, 2, 3}, {4}), 0);
       },
       {rnd({4, 3}, 82)}},
      {"index_select dim 1", [](const In& x) {
         return index_select(x[0], ints_on<uint32_t>(x[0], {1, 1, 0}, {3}), 1);
       },
       {rnd({2, 3}, 83)}},
      // dtable[ids[i]] += g[i]
      {"embedding", [](const In& x) { return embedding(ints_on<int32_t>(x[0], {4, 0, 4, 1, 2, 4}, {2, 3}), x[0]); },
       {rnd({5, 3}, 84)}},
  };
}

std::vector<OpCase> view_cases() {
  return {
      // the gradient of a view is the view's inverse applied to g
      {"narrow", [](const In& x) { return x[0].narrow(1, 1, 3); }, {rnd({4, 5}, 90)}},
      {"transpose", [](const In& x) { return x[0].transpose(0, 2); }, {rnd({2, 3, 4}, 91)}},
      {"t", [](const In& x) { return x[0].t(); }, {rnd({3, 4}, 92)}},
      {"permute", [](const In& x) { return x[0].permute({2, 0, 1}); }, {rnd({2, 3, 4}, 93)}},
      {"reshape", [](const In& x) { return x[0].reshape({4, 3}); }, {rnd({2, 6}, 94)}},
      // broadcast: the gradient is summed over the broadcast dims
      {"broadcast_as", [](const In& x) { return x[0].broadcast_as({2, 3, 4}); }, {rnd({3, 1}, 95)}},
      {"squeeze", [](const In& x) { return x[0].squeeze(1); }, {rnd({3, 1, 2}, 96)}},
      {"unsqueeze", [](const In& x) { return x[0].unsqueeze(0); }, {rnd({3, 2}, 97)}},
      // views feeding an op directly (the op reads the strided layout; the view's rule maps back)
      {"narrow -> mul", [](const In& x) { return mul(x[0].narrow(1, 1, 2), x[0].narrow(1, 0, 2)); },
       {rnd({3, 4}, 98)}},
      {"permute -> exp", [](const In& x) { return exp(x[0].permute({1, 0})); }, {rnd({3, 2}, 99)}},
      {"broadcast_as -> mul", [](const In& x) { return mul(x[0].broadcast_as({4, 3}), x[1]); },
       {rnd({3}, 100), rnd({4, 3}, 101)}},
      // d copy / dx = 1
      {"contiguous", [](const In& x) { return x[0].transpose(0, 1).contiguous(); }, {rnd({2, 3}, 102)}},
      {"copy", [](const In& x) { return x[0].copy(); }, {rnd({2, 3}, 103)}},
      {"to_device (Cpu -> own device)", [](const In& x) { return x[0].to_device(x[0].device()); }, {rnd({4}, 104)}},
  };
}

// Ops fed non-contiguous views (transposed, narrowed, broadcast): the forward must read the
// layout and the rule must hand back a gradient the view's own rule can map to the input.
std::vector<OpCase> strided_input_cases() {
  return {
      // d tanh(x^T) / dx = (1 - tanh^2) transposed back
      {"tanh of a transposed view", [](const In& x) { return tanh(x[0].t()); }, {rnd({3, 4}, 140)}},
      {"sum over dim 0 of a permuted view", [](const In& x) { return sum(x[0].permute({2, 0, 1}), {0}); },
       {rnd({2, 3, 4}, 141)}},
      {"max over a narrowed view", [](const In& x) { return max(x[0].narrow(1, 1, 3), {1}); }, {rnd({3, 5}, 142)}},
      {"log_softmax of a narrowed view", [](const In& x) { return log_softmax(x[0].narrow(0, 1, 2)); },
       {rnd({4, 5}, 143)}},
      {"layer_norm of a transposed view", [](const In& x) { return layer_norm(x[0].t(), x[1], x[2], 1e-5); },
       {rnd({4, 3}, 144), rnd({4}, 145), rnd({4}, 146)}},
      {"rms_norm with a broadcast weight view", [](const In& x) {
         return rms_norm(x[0], x[1].broadcast_as({2, 4}).narrow(0, 0, 1).squeeze(0), 1e-5);
       },
       {rnd({3, 4}, 147), rnd({4}, 148)}},
      {"index_select of a transposed view", [](const In& x) {
         return index_select(x[0].t(), ints_on<int64_t>(x[0], {1, 1, 0}, {3}), 0);
       },
       {rnd({3, 2}, 149)}},
      {"cat of a view and its transpose", [](const In& x) { return cat({x[0], x[0].t()}, 0); }, {rnd({2, 2}, 150)}},
      {"where over broadcast views", [](const In& x) {
         Tensor cond = ints_on<uint8_t>(x[0], {1, 0, 0, 1}, {2, 2});
         return where(cond, x[0].unsqueeze(0).broadcast_as({2, 2}), x[1].reshape({2, 1}));
       },
       {rnd({2}, 151), rnd({2}, 152)}},
      {"matmul with a batch-broadcast view", [](const In& x) { return matmul(x[0].broadcast_as({2, 3, 4}), x[1]); },
       {rnd({3, 4}, 153), rnd({2, 4, 2}, 154)}},
  };
}

// The research toolkit's differentiable ops.
std::vector<OpCase> research_cases() {
  // clamp's inputs keep away from the bounds (the derivative jumps there)
  Tensor clamp_in = Tensor::from_vec(std::vector<double>{-1.2, -0.3, 0.1, 0.45, 0.9, 2.0}, {2, 3}, Device::cpu());
  return {
      {"sin", [](const In& x) { return sin(x[0]); }, {rnd({2, 3}, 160)}},                   // cos x
      {"cos", [](const In& x) { return cos(x[0]); }, {rnd({2, 3}, 161)}},                   // -sin x
      {"abs", [](const In& x) { return abs(x[0]); }, {away_from_zero({2, 3}, 162)}},        // sign x
      // Phi(x) + x phi(x), Phi the normal CDF and phi its density
      {"gelu_erf", [](const In& x) { return gelu_erf(x[0]); }, {rnd({2, 3}, 163)}},
      {"clamp", [](const In& x) { return clamp(x[0], -0.5, 0.7); }, {clamp_in}},  // 1 inside, 0 outside
      {"2 * x", [](const In& x) { return 2.0 * x[0]; }, {rnd({3}, 164)}},                    // 2
      {"1 - x", [](const In& x) { return 1.0 - x[0]; }, {rnd({3}, 165)}},                    // -1
      {"3 / x", [](const In& x) { return 3.0 / x[0]; }, {away_from_zero({3}, 166)}},         // -3 / x^2
      // d cumsum / dx_i = sum of g over j >= i (the reversed running sum)
      {"cumsum dim 1", [](const In& x) { return cumsum(x[0], 1); }, {rnd({2, 4}, 167)}},
      {"cumsum dim -3 of a transposed view", [](const In& x) { return cumsum(x[0].transpose(0, 2), -3); },
       {rnd({3, 2, 4}, 168)}},
      // dx[idx[e] at dim, rest of e's coordinates] += g[e]
      {"gather dim 1", [](const In& x) {
         return gather(x[0], 1, ints_on<int64_t>(x[0], {2, 0, 0, 1, 1, 1}, {2, 3}));
       },
       {rnd({2, 4}, 169)}},
      {"gather dim 0, index smaller than x", [](const In& x) {
         return gather(x[0], 0, ints_on<int32_t>(x[0], {2, 0, 1, 1}, {2, 2}));
       },
       {rnd({3, 3}, 170)}},
      // dx = g; dsrc = gather(g, dim, index), zero past the index's shape
      {"scatter_add", [](const In& x) {
         return scatter_add(x[0], 0, ints_on<int64_t>(x[0], {0, 1, 0, 1, 1, 0}, {2, 3}), x[1]);
       },
       {rnd({2, 3}, 171), rnd({2, 3}, 172)}},
      {"scatter_add, src larger than index", [](const In& x) {
         return scatter_add(x[0], 1, ints_on<int64_t>(x[0], {2, 2, 0}, {1, 3}), x[1]);
       },
       {rnd({2, 3}, 173), rnd({2, 4}, 174)}},
      // softmax over a dim other than the last: the last-dim rule, moved
      {"softmax dim 0", [](const In& x) { return softmax(x[0], 0); }, {rnd({3, 4}, 175)}},
      {"log_softmax dim 1 of rank 3", [](const In& x) { return log_softmax(x[0], 1); }, {rnd({2, 3, 4}, 176)}},
      // (softmax(logits) - one_hot(t)) / count, zero on ignored rows
      {"cross_entropy", [](const In& x) {
         return cross_entropy(x[0], ints_on<int64_t>(x[0], {2, 0, 3}, {3}));
       },
       {rnd({3, 4}, 177)}},
      {"cross_entropy with ignore_index", [](const In& x) {
         return cross_entropy(x[0], ints_on<int64_t>(x[0], {2, -100, 3, 1}, {4}), -100);
       },
       {rnd({4, 5}, 178)}},
      // -[c == t_n] / count
      {"nll_loss", [](const In& x) { return nll_loss(x[0], ints_on<int32_t>(x[0], {1, 1, 0}, {3})); },
       {rnd({3, 2}, 179)}},
      // rope is a rotation R(theta): dx = R(-theta) g
      {"rope half rotation", [](const In& x) {
         return rope(x[0], ints_on<int64_t>(x[0], {0, 3, 1}, {3}), 100.0);
       },
       {rnd({3, 2, 4}, 180)}},
      {"rope interleaved, partial", [](const In& x) {
         return rope(x[0], ints_on<int32_t>(x[0], {5, 2}, {2}), 10000.0, RopeStyle::Interleaved, 4);
       },
       {rnd({2, 6}, 181)}},
      // dropout is linear for a fixed seed: dx = mask / (1 - p) * g
      {"dropout", [](const In& x) { return dropout(x[0], 0.4, 7); }, {rnd({4, 5}, 182)}},
      // tril/triu: g on the kept triangle
      {"tril", [](const In& x) { return tril(x[0]); }, {rnd({3, 4}, 183)}},
      {"triu -1 of a batch", [](const In& x) { return triu(x[0], -1); }, {rnd({2, 3, 3}, 184)}},
      // views: select, flatten, reshape with -1
      {"select and operator[]", [](const In& x) { return mul(x[0].select(1, -1), x[0][0]); }, {rnd({3, 3}, 185)}},
      {"flatten of a transposed view", [](const In& x) { return x[0].t().flatten(); }, {rnd({2, 3}, 186)}},
      {"reshape {-1, 2}", [](const In& x) { return x[0].reshape({-1, 2}); }, {rnd({2, 3}, 187)}},
  };
}

// Casts compare f32-rounded values, so finite differences need a larger step and tolerance.
std::vector<OpCase> cast_cases() {
  OpCase c{"cast F64 -> F32 -> F64", [](const In& x) { return cast(cast(x[0], DType::F32), DType::F64); },
           {rnd({2, 3}, 110)}, 1e-3, 1e-4, false};  // d/dx = 1 (CPU only: F64 is not a CUDA dtype)
  OpCase t{"to_dtype F32 and back", [](const In& x) { return x[0].to_dtype(DType::F32).to_dtype(DType::F64); },
           {rnd({3}, 111)}, 1e-3, 1e-4, false};  // d/dx = 1
  return {c, t};
}

// Each case reports on its own: an exception in one (say, an op that records no node)
// fails that case and the loop goes on to the next.
void run_cpu(const std::vector<OpCase>& cases) {
  for (const OpCase& c : cases) {
    try {
      autograd::GradcheckResult r = autograd::gradcheck(c.f, c.inputs, c.eps, c.tol);
      CHECK_MESSAGE(r.ok, c.name, ": ", r.message);
      CHECK(r.checked > 0);
    } catch (const std::exception& e) {
      FAIL_CHECK(c.name, " threw: ", std::string(e.what()));
    }
  }
}

void run_cuda(const std::vector<OpCase>& cases) {
  for (const OpCase& c : cases) {
    if (!c.cuda) continue;
    try {
      autograd::GradcheckResult r = autograd::gradcheck_device(c.f, c.inputs, Device::cuda(0));
      CHECK_MESSAGE(r.ok, c.name, " (Cuda f32 vs Cpu f64): ", r.message);
    } catch (const std::exception& e) {
      FAIL_CHECK(c.name, " (Cuda) threw: ", std::string(e.what()));
    }
  }
}

}  // namespace

TEST_CASE("gradcheck cpu: unary ops") { run_cpu(unary_cases()); }
TEST_CASE("gradcheck cpu: binary ops with broadcasting") { run_cpu(binary_cases()); }
TEST_CASE("gradcheck cpu: reductions") { run_cpu(reduce_cases()); }
TEST_CASE("gradcheck cpu: softmax and norms") { run_cpu(softmax_norm_cases()); }
TEST_CASE("gradcheck cpu: matmul, cat, index_select, embedding") { run_cpu(matmul_gather_cases()); }
TEST_CASE("gradcheck cpu: views") { run_cpu(view_cases()); }
TEST_CASE("gradcheck cpu: ops on strided views") { run_cpu(strided_input_cases()); }
TEST_CASE("gradcheck cpu: casts") { run_cpu(cast_cases()); }
TEST_CASE("gradcheck cpu: research toolkit ops") { run_cpu(research_cases()); }

TEST_CASE("gradcheck cuda: unary ops") { SKIP_WITHOUT_CUDA(); run_cuda(unary_cases()); }
TEST_CASE("gradcheck cuda: binary ops with broadcasting") { SKIP_WITHOUT_CUDA(); run_cuda(binary_cases()); }
TEST_CASE("gradcheck cuda: reductions") { SKIP_WITHOUT_CUDA(); run_cuda(reduce_cases()); }
TEST_CASE("gradcheck cuda: softmax and norms") { SKIP_WITHOUT_CUDA(); run_cuda(softmax_norm_cases()); }
TEST_CASE("gradcheck cuda: matmul, cat, index_select, embedding") { SKIP_WITHOUT_CUDA(); run_cuda(matmul_gather_cases()); }
TEST_CASE("gradcheck cuda: views") { SKIP_WITHOUT_CUDA(); run_cuda(view_cases()); }
TEST_CASE("gradcheck cuda: ops on strided views") { SKIP_WITHOUT_CUDA(); run_cuda(strided_input_cases()); }
TEST_CASE("gradcheck cuda: research toolkit ops") { SKIP_WITHOUT_CUDA(); run_cuda(research_cases()); }

TEST_CASE("gradcheck: comparisons, argmax/argmin and copy_into record no graph") {
  Tensor a = rnd({2, 3}, 120), b = rnd({2, 3}, 121);
  a.requires_grad(true);
  b.requires_grad(true);
  for (const Tensor& t : {eq(a, b), ne(a, b), lt(a, b), le(a, b), gt(a, b), ge(a, b)}) {
    CHECK(t.dtype() == DType::U8);
    CHECK(t.grad_fn() == nullptr);
  }
  CHECK(argmax(a, 1).grad_fn() == nullptr);
  CHECK(argmin(a, 0).grad_fn() == nullptr);
  Tensor dst = Tensor::zeros({2, 3}, DType::F64, Device::cpu());
  copy_into(dst, a);
  CHECK(dst.grad_fn() == nullptr);
  CHECK(dst.to_f64_vec() == a.to_f64_vec());
}

namespace {
// The worked example of docs/autograd.md, verbatim in substance: softplus as a CustomOp.
autograd::CustomOp make_softplus() {
  autograd::CustomOp op;
  op.name = "softplus";
  op.cpu_forward = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{log(add_scalar(exp(in[0]), 1.0))}; };
  op.cuda_forward = op.cpu_forward;
  // d softplus / dx = sigmoid(x)
  op.backward = [](const std::vector<Tensor>& in, const std::vector<Tensor>&, const Tensor& grad_out) {
    return std::vector<Tensor>{mul(grad_out, sigmoid(in[0]))};
  };
  return op;
}
}  // namespace

TEST_CASE("gradcheck: the docs' custom op example (softplus) joins the graph like a built-in op") {
  Tensor x = Tensor::randn({4}, DType::F32, Device::cpu(), 0).requires_grad(true);
  Tensor y = make_softplus()({x});
  REQUIRE(y.grad_fn() != nullptr);
  CHECK(y.grad_fn()->name == "softplus");
  CHECK(y.grad_fn()->inputs.size() == 1);
  sum_all(mul_scalar(y, 2.0)).backward();  // built-in ops before and after the custom one
  std::vector<double> xv = x.to_f64_vec(), gx = x.grad().to_f64_vec();
  for (size_t i = 0; i < xv.size(); ++i) CHECK(gx[i] == doctest::Approx(2 / (1 + std::exp(-xv[i]))).epsilon(1e-6));
  auto f = [](const std::vector<Tensor>& in) { return mul(make_softplus()({in[0]}), in[1]); };
  autograd::GradcheckResult r = autograd::gradcheck(f, {rnd({2, 3}, 130), rnd({2, 3}, 131)});
  CHECK_MESSAGE(r.ok, r.message);
  if (Device::cuda_available()) {
    r = autograd::gradcheck_device(f, {rnd({2, 3}, 130), rnd({2, 3}, 131)}, Device::cuda(0));
    CHECK_MESSAGE(r.ok, "softplus (Cuda f32 vs Cpu f64): ", r.message);
  } else {
    MESSAGE("SKIPPED (CUDA part): no CUDA device");
  }
}
