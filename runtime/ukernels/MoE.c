//===- MoE.c - mixture-of-experts layer over routed tokens only ------------===//
//
// Part of xfmr.
//
// One call runs a block of tokens through an xfmr.moe layer:
//   1. router logits x . router, softmax over the experts (or sigmoids,
//      chosen with a bias among the experts of the best groups:
//      DeepSeek-V3), the top_k highest (lowest index first on ties),
//      optionally renormalised, times the routed scale;
//   2. the (token, slot) pairs grouped by expert (counting sort, token
//      order kept inside a group);
//   3. per expert with tokens: its rows of x gathered, gate and up
//      products, act(gate) * up, the down product: only the selected
//      experts' weights are read (decode: top_k of E);
//   4. out[t] = sum over slots j, in slot order, of score_j * y_j.
// Under expert parallelism (xfmr_uk_moe_set_partition) step 3 runs only
// this rank's experts and step 4 sums only their slots; the generated code
// then all-reduces the partial outputs (xfmr_uk_moe_combine).
// Products run on weights packed at compile time into panels of 16 columns
// ([K][16] each, contiguous: one stream per panel) in tiles of up to 6 rows
// x 2 panels (AVX-512), 4 rows x 1 panel (AVX2) or one element at a time
// (any CPU). Every element is one FMA chain over k = 0..K-1 from 0, on
// every path and whatever the other rows of the call: a token's result
// depends on that token alone (batch invariance), and the paths give the
// same bits.
//
//===----------------------------------------------------------------------===//

#include "MoE.h"
#include "CPUCheck.h"
#include "MatmulNarrow.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

enum { kPanel = XFMR_UK_MOE_COLUMNS };

static uint64_t gStats[5];

/// Load statistics: tokens routed to each expert of each layer. A layer is
/// known by its packed router (one per xfmr.moe); layers are numbered in
/// the order they first ran. Entries are published with a release store of
/// the count and never removed.
enum { kMaxLoadLayers = 1024 };
typedef struct {
  const float *router;
  int64_t experts;
  uint64_t *tokens;
} LayerLoad;
static LayerLoad gLoad[kMaxLoadLayers];
static int64_t gLoadLayers;
static pthread_mutex_t gLoadMutex = PTHREAD_MUTEX_INITIALIZER;

/// The counters of the layer with `router`, registered on first use; null
/// past kMaxLoadLayers layers or if the allocation fails.
static uint64_t *layerLoad(const float *router, int64_t experts) {
  int64_t n = __atomic_load_n(&gLoadLayers, __ATOMIC_ACQUIRE);
  for (int64_t i = 0; i < n; ++i)
    if (gLoad[i].router == router && gLoad[i].experts == experts)
      return gLoad[i].tokens;
  pthread_mutex_lock(&gLoadMutex);
  uint64_t *tokens = NULL;
  n = gLoadLayers;
  for (int64_t i = 0; i < n && !tokens; ++i)
    if (gLoad[i].router == router && gLoad[i].experts == experts)
      tokens = gLoad[i].tokens;
  if (!tokens && n < kMaxLoadLayers && (tokens = calloc((size_t)experts, sizeof(uint64_t)))) {
    gLoad[n] = (LayerLoad){router, experts, tokens};
    __atomic_store_n(&gLoadLayers, n + 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&gLoadMutex);
  return tokens;
}

int64_t xfmr_uk_moe_load_layers(void) {
  return __atomic_load_n(&gLoadLayers, __ATOMIC_ACQUIRE);
}

int64_t xfmr_uk_moe_expert_tokens(int64_t layer, uint64_t *out, int64_t capacity) {
  if (layer < 0 || layer >= xfmr_uk_moe_load_layers())
    return 0;
  const LayerLoad *l = &gLoad[layer];
  for (int64_t e = 0; e < l->experts && e < capacity; ++e)
    out[e] = __atomic_load_n(&l->tokens[e], __ATOMIC_RELAXED);
  return l->experts;
}
static int64_t gRank = 0, gRanks = 1;
static xfmr_uk_moe_combine_fn gCombine;
static void *gCombineContext;

void xfmr_uk_moe_set_partition(int64_t rank, int64_t ranks, xfmr_uk_moe_combine_fn combine,
                               void *context) {
  gRank = rank;
  gRanks = ranks < 1 ? 1 : ranks;
  gCombine = combine;
  gCombineContext = context;
}

void xfmr_uk_moe_combine(float *out, int64_t count) {
  if (gRanks > 1 && gCombine)
    gCombine(out, count, gCombineContext);
}

/// Whether this rank computes expert `e` of `experts`.
static int owns(int64_t e, int64_t experts) {
  return gRanks <= 1 || (e * gRanks) / experts == gRank;
}

static int64_t panelsOf(int64_t n) { return (n + kPanel - 1) / kPanel; }

int64_t xfmr_uk_moe_packed_floats(int64_t count, int64_t k, int64_t n) {
  return count * panelsOf(n) * k * kPanel;
}

void xfmr_uk_moe_pack(const float *src, int64_t count, int64_t k, int64_t n, float *dst) {
  int64_t panels = panelsOf(n);
  for (int64_t m = 0; m < count; ++m) {
    const float *s = src + m * k * n;
    float *d = dst + m * panels * k * kPanel;
    for (int64_t p = 0; p < panels; ++p)
      for (int64_t kk = 0; kk < k; ++kk)
        for (int64_t j = 0; j < kPanel; ++j) {
          int64_t col = p * kPanel + j;
          d[(p * k + kk) * kPanel + j] = col < n ? s[kk * n + col] : 0.0f;
        }
  }
}

void xfmr_uk_moe_stats(uint64_t out[5]) {
  for (int i = 0; i < 5; ++i)
    out[i] = __atomic_load_n(&gStats[i], __ATOMIC_RELAXED);
}

void xfmr_uk_moe_reset_stats(void) {
  for (int i = 0; i < 5; ++i)
    __atomic_store_n(&gStats[i], 0, __ATOMIC_RELAXED);
  int64_t layers = xfmr_uk_moe_load_layers();
  for (int64_t i = 0; i < layers; ++i)
    for (int64_t e = 0; e < gLoad[i].experts; ++e)
      __atomic_store_n(&gLoad[i].tokens[e], 0, __ATOMIC_RELAXED);
}

//===----------------------------------------------------------------------===//
// Products: c[m, n] = a[m, k] . W[k, n], W packed
//===----------------------------------------------------------------------===//

/// One panel of one row on any CPU.
static void panelScalar(const float *a, int64_t k, const float *w, float *c, int64_t cols) {
  float acc[kPanel] = {0};
  for (int64_t kk = 0; kk < k; ++kk)
    for (int j = 0; j < kPanel; ++j)
      acc[j] = fmaf(a[kk], w[kk * kPanel + j], acc[j]);
  for (int64_t j = 0; j < cols; ++j)
    c[j] = acc[j];
}

#if defined(__x86_64__)
/// R rows x P panels (R <= 6, P <= 2) with 512-bit FMAs.
__attribute__((target("avx2,fma,avx512f"), always_inline)) static inline void
tile512(const float *a, int64_t lda, int64_t k, const float *w0, const float *w1, float *c,
        int64_t ldc, int64_t cols, const int R, const int P) {
  __m512 acc[6][2];
  for (int r = 0; r < R; ++r)
    for (int q = 0; q < P; ++q)
      acc[r][q] = _mm512_setzero_ps();
  for (int64_t kk = 0; kk < k; ++kk) {
    __m512 b0 = _mm512_loadu_ps(w0 + kk * kPanel);
    __m512 b1 = P > 1 ? _mm512_loadu_ps(w1 + kk * kPanel) : b0;
    for (int r = 0; r < R; ++r) {
      __m512 av = _mm512_set1_ps(a[r * lda + kk]);
      acc[r][0] = _mm512_fmadd_ps(av, b0, acc[r][0]);
      if (P > 1)
        acc[r][1] = _mm512_fmadd_ps(av, b1, acc[r][1]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int q = 0; q < P; ++q) {
      int64_t left = cols - q * kPanel;
      __mmask16 mask = left >= kPanel ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
      _mm512_mask_storeu_ps(c + r * ldc + q * kPanel, mask, acc[r][q]);
    }
}

__attribute__((target("avx2,fma,avx512f"))) static void
product512(const float *a, int64_t lda, int64_t m, int64_t k, const float *w, int64_t n,
           float *c, int64_t ldc) {
  int64_t panels = panelsOf(n);
  for (int64_t p = 0; p < panels; p += 2) {
    int P = panels - p >= 2 ? 2 : 1;
    const float *w0 = w + p * k * kPanel, *w1 = w0 + k * kPanel;
    int64_t cols = n - p * kPanel < P * kPanel ? n - p * kPanel : P * kPanel;
    for (int64_t r0 = 0; r0 < m; r0 += 6) {
      int R = m - r0 >= 6 ? 6 : (int)(m - r0);
      const float *ar = a + r0 * lda;
      float *cr = c + r0 * ldc + p * kPanel;
#define XFMR_MOE_TILE(r)                                                                    \
  case r:                                                                                   \
    if (P == 2)                                                                             \
      tile512(ar, lda, k, w0, w1, cr, ldc, cols, r, 2);                                     \
    else                                                                                    \
      tile512(ar, lda, k, w0, w1, cr, ldc, cols, r, 1);                                     \
    break;
      switch (R) {
        XFMR_MOE_TILE(1)
        XFMR_MOE_TILE(2)
        XFMR_MOE_TILE(3)
        XFMR_MOE_TILE(4)
        XFMR_MOE_TILE(5)
        XFMR_MOE_TILE(6)
      }
#undef XFMR_MOE_TILE
    }
  }
}

/// R rows (R <= 4) x one panel with 256-bit FMAs (two registers a row).
__attribute__((target("avx2,fma"), always_inline)) static inline void
tile256(const float *a, int64_t lda, int64_t k, const float *w, float *c, int64_t ldc,
        int64_t cols, const int R) {
  __m256 acc[4][2];
  for (int r = 0; r < R; ++r)
    acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t kk = 0; kk < k; ++kk) {
    __m256 b0 = _mm256_loadu_ps(w + kk * kPanel), b1 = _mm256_loadu_ps(w + kk * kPanel + 8);
    for (int r = 0; r < R; ++r) {
      __m256 av = _mm256_broadcast_ss(a + r * lda + kk);
      acc[r][0] = _mm256_fmadd_ps(av, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(av, b1, acc[r][1]);
    }
  }
  for (int r = 0; r < R; ++r) {
    float tmp[kPanel];
    _mm256_storeu_ps(tmp, acc[r][0]);
    _mm256_storeu_ps(tmp + 8, acc[r][1]);
    for (int64_t j = 0; j < cols; ++j)
      c[r * ldc + j] = tmp[j];
  }
}

__attribute__((target("avx2,fma"))) static void product256(const float *a, int64_t lda, int64_t m,
                                                           int64_t k, const float *w, int64_t n,
                                                           float *c, int64_t ldc) {
  int64_t panels = panelsOf(n);
  for (int64_t p = 0; p < panels; ++p) {
    const float *wp = w + p * k * kPanel;
    int64_t cols = n - p * kPanel < kPanel ? n - p * kPanel : kPanel;
    for (int64_t r0 = 0; r0 < m; r0 += 4) {
      int R = m - r0 >= 4 ? 4 : (int)(m - r0);
      const float *ar = a + r0 * lda;
      float *cr = c + r0 * ldc + p * kPanel;
      switch (R) {
      case 1: tile256(ar, lda, k, wp, cr, ldc, cols, 1); break;
      case 2: tile256(ar, lda, k, wp, cr, ldc, cols, 2); break;
      case 3: tile256(ar, lda, k, wp, cr, ldc, cols, 3); break;
      default: tile256(ar, lda, k, wp, cr, ldc, cols, 4); break;
      }
    }
  }
}
#endif

/// The product on the widest path this CPU has (`level` caps it for tests:
/// 2 AVX-512, 1 AVX2, 0 scalar).
static void product(int level, const float *a, int64_t lda, int64_t m, int64_t k,
                    const float *w, int64_t n, float *c, int64_t ldc) {
#if defined(__x86_64__)
  if (level >= 2 && xfmr_uk_has_avx512()) {
    product512(a, lda, m, k, w, n, c, ldc);
    return;
  }
  if (level >= 1 && xfmr_uk_has_avx2()) {
    product256(a, lda, m, k, w, n, c, ldc);
    return;
  }
#endif
  int64_t panels = panelsOf(n);
  for (int64_t p = 0; p < panels; ++p) {
    int64_t cols = n - p * kPanel < kPanel ? n - p * kPanel : kPanel;
    for (int64_t r = 0; r < m; ++r)
      panelScalar(a + r * lda, k, w + p * k * kPanel, c + r * ldc + p * kPanel, cols);
  }
}

//===----------------------------------------------------------------------===//
// The layer
//===----------------------------------------------------------------------===//

static float activate(float g, int act) {
  switch (act) {
  case 1: return 0.5f * g * (1.0f + erff(g * 0.70710678118654752f));
  case 2:
    return 0.5f * g * (1.0f + tanhf(0.79788456080286536f * (g + 0.044715f * g * g * g)));
  case 3: return g > 0.0f ? g : 0.0f;
  default: return g / (1.0f + expf(-g));
  }
}

/// The experts' weights of a layer: f32 panels (xfmr_uk_moe_pack) or
/// narrow panels (xfmr_uk_pack_narrow, one matrix after the other) with
/// per-output-column f32 scales (int8, fp8; none for bf16).
typedef struct {
  int format; // XFMR_UK_MOE_F32, _BF16, _I8, _FP8
  const void *wg, *wu, *wd;
  const float *sg, *su, *sd; // [E][I], [E][I], [E][H]
  int64_t h, inter;
  const float *bg, *bu, *bd; // biases [E][I], [E][I], [E][H], or null
  // gpt-oss's clamped SwiGLU (XFMR_UK_MOE_CLAMPED_SWIGLU):
  // min(g, limit) * sigmoid(alpha * min(g, limit)) * (clamp(u, +-limit) + upOffset).
  float alpha, limit, upOffset;
  int clamped;
} Experts;

static int64_t elementBytes(int format) {
  return format == XFMR_UK_MOE_F32 ? 4 : format == XFMR_UK_MOE_BF16 ? 2 : 1;
}

/// Bytes of one expert's matrix [k, n] as packed in `format`.
static int64_t matrixBytes(int format, int64_t k, int64_t n) {
  if (format == XFMR_UK_MOE_F32)
    return xfmr_uk_moe_packed_floats(1, k, n) * (int64_t)sizeof(float);
  return xfmr_uk_packed_narrow_bytes(n, k, elementBytes(format));
}

/// c[m, n] = a[m, k] . W (expert matrix `w` in `format`), times the column
/// scales `s` if any: each element one FMA chain over k, then one multiply.
static void expertProduct(int level, int format, const float *a, int64_t m, int64_t k,
                          const void *w, const float *s, int64_t n, float *c) {
  switch (format) {
  case XFMR_UK_MOE_BF16: xfmr_uk_matmul_f32bf16(a, m, k, w, 0, n, c, n); break;
  case XFMR_UK_MOE_I8: xfmr_uk_matmul_f32i8(a, m, k, w, 0, n, c, n); break;
  case XFMR_UK_MOE_FP8: xfmr_uk_matmul_f32fp8(a, m, k, w, 0, n, c, n); break;
  default: product(level, a, k, m, k, w, n, c, n); break;
  }
  if (s)
    for (int64_t r = 0; r < m; ++r)
      for (int64_t j = 0; j < n; ++j)
        c[r * n + j] *= s[j];
}

/// c[r, j] += b[j] for the n rows of `c` ([n, cols]); nothing for null `b`.
static void addBias(float *c, int64_t n, int64_t cols, const float *b) {
  if (!b)
    return;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < cols; ++j)
      c[r * cols + j] += b[j];
}

/// y[n, H] = down(act(x . gate) * (x . up)) for the n rows of `x`
/// ([n, H]) through expert `e`, each product plus its bias if any;
/// `gate`, `up` are [n, I] scratch.
static void gatedMLP(int level, const Experts *w, int64_t e, const float *x, int64_t n, int act,
                     float *gate, float *up, float *y) {
  int64_t h = w->h, inter = w->inter;
  int64_t gateBytes = matrixBytes(w->format, h, inter), downBytes = matrixBytes(w->format, inter, h);
  const char *wg = (const char *)w->wg + e * gateBytes, *wu = (const char *)w->wu + e * gateBytes;
  const char *wd = (const char *)w->wd + e * downBytes;
  expertProduct(level, w->format, x, n, h, wg, w->sg ? w->sg + e * inter : 0, inter, gate);
  expertProduct(level, w->format, x, n, h, wu, w->su ? w->su + e * inter : 0, inter, up);
  addBias(gate, n, inter, w->bg ? w->bg + e * inter : 0);
  addBias(up, n, inter, w->bu ? w->bu + e * inter : 0);
  if (w->clamped) {
    for (int64_t i = 0; i < n * inter; ++i) {
      float g = gate[i] < w->limit ? gate[i] : w->limit;
      float u = up[i] < -w->limit ? -w->limit : up[i] > w->limit ? w->limit : up[i];
      gate[i] = g / (1.0f + expf(-w->alpha * g)) * (u + w->upOffset);
    }
  } else {
    for (int64_t i = 0; i < n * inter; ++i)
      gate[i] = activate(gate[i], act) * up[i];
  }
  expertProduct(level, w->format, gate, n, inter, wd, w->sd ? w->sd + e * h : 0, h, y);
  addBias(y, n, h, w->bd ? w->bd + e * h : 0);
}

/// How a layer routes (MoE.h): the flags, the selection bias and the
/// routed scale.
typedef struct {
  int64_t flags;
  const float *routerBias; // [E] added to the logits, or null
  const float *bias;       // [E] selection bias, or null
  float scale;
} Routing;

/// The top_k of `choice` ([E]) into ids, highest first, lowest index on
/// ties; -inf entries are never chosen while others are left.
static void topExperts(const float *choice, int64_t experts, int64_t topK, int32_t *ids) {
  for (int64_t j = 0; j < topK; ++j) {
    int64_t best = -1;
    for (int64_t e = 0; e < experts; ++e) {
      int taken = 0;
      for (int64_t i = 0; i < j; ++i)
        taken |= ids[i] == e;
      if (!taken && (best < 0 || choice[e] > choice[best]))
        best = e;
    }
    ids[j] = (int32_t)best;
  }
}

/// Group-limited routing: keeps the choice scores of the experts in the
/// `topGroups` groups (of `groups` equal consecutive ones) whose two highest
/// choice scores sum highest (lowest group on ties); the others become -inf.
static void limitToGroups(float *choice, int64_t experts, int64_t groups, int64_t topGroups) {
  int64_t size = experts / groups;
  float groupScore[XFMR_UK_MOE_MAX_GROUPS];
  int kept[XFMR_UK_MOE_MAX_GROUPS] = {0};
  for (int64_t g = 0; g < groups; ++g) {
    const float *c = choice + g * size;
    float first = -INFINITY, second = -INFINITY;
    for (int64_t i = 0; i < size; ++i) {
      if (c[i] > first) {
        second = first;
        first = c[i];
      } else if (c[i] > second) {
        second = c[i];
      }
    }
    groupScore[g] = size > 1 ? first + second : first;
  }
  for (int64_t j = 0; j < topGroups; ++j) {
    int64_t best = -1;
    for (int64_t g = 0; g < groups; ++g)
      if (!kept[g] && (best < 0 || groupScore[g] > groupScore[best]))
        best = g;
    kept[best] = 1;
  }
  for (int64_t g = 0; g < groups; ++g)
    if (!kept[g])
      for (int64_t i = 0; i < size; ++i)
        choice[g * size + i] = -INFINITY;
}

/// The scores of `logits` ([E], into probs: a softmax, or sigmoids) and
/// the chosen top_k: ids[j], scores[j], highest first, lowest index on
/// ties; renormalised and scaled as `r` says. `choice` is [E] scratch.
static void route(const float *logits, int64_t experts, int64_t topK, const Routing *r,
                  float *probs, float *choice, int32_t *ids, float *scores) {
  if (r->flags & XFMR_UK_MOE_SIGMOID) {
    for (int64_t e = 0; e < experts; ++e) {
      probs[e] = 1.0f / (1.0f + expf(-logits[e]));
      choice[e] = r->bias ? probs[e] + r->bias[e] : probs[e];
    }
    int64_t groups = (r->flags >> XFMR_UK_MOE_GROUPS_SHIFT) & 0xff;
    int64_t topGroups = (r->flags >> XFMR_UK_MOE_TOP_GROUPS_SHIFT) & 0xff;
    if (groups > 1 && topGroups < groups && experts % groups == 0)
      limitToGroups(choice, experts, groups, topGroups);
    topExperts(choice, experts, topK, ids);
  } else {
    float mx = logits[0];
    for (int64_t e = 1; e < experts; ++e)
      mx = logits[e] > mx ? logits[e] : mx;
    float sum = 0.0f;
    for (int64_t e = 0; e < experts; ++e) {
      probs[e] = expf(logits[e] - mx);
      sum += probs[e];
    }
    for (int64_t e = 0; e < experts; ++e)
      probs[e] /= sum;
    topExperts(probs, experts, topK, ids);
  }
  for (int64_t j = 0; j < topK; ++j)
    scores[j] = probs[ids[j]];
  if (r->flags & XFMR_UK_MOE_NORMALIZE) {
    float total = 0.0f;
    for (int64_t j = 0; j < topK; ++j)
      total += scores[j];
    for (int64_t j = 0; j < topK; ++j)
      scores[j] /= total;
  }
  if (r->scale != 1.0f)
    for (int64_t j = 0; j < topK; ++j)
      scores[j] *= r->scale;
}

static void moe(int level, const float *x, int64_t rows, int64_t experts, int64_t topK,
                const Routing *routing, const float *router, const Experts *w, float *out) {
  int64_t h = w->h, inter = w->inter;
  if (rows <= 0)
    return;
  int64_t slots = rows * topK;
  // logits + probs [rows, E], scores [slots], gathered rows [rows, H],
  // gate and up [rows, I], per-slot outputs [slots, H], choice scores [E].
  size_t floats = (size_t)(2 * rows * experts + slots + rows * h + 2 * rows * inter +
                           slots * h + experts);
  size_t ints = (size_t)(slots + slots + experts + 1);
  float *f = malloc(floats * sizeof(float));
  int32_t *iv = malloc(ints * sizeof(int32_t));
  if (!f || !iv) {
    free(f);
    free(iv);
    for (int64_t i = 0; i < rows * h; ++i)
      out[i] = NAN;
    return;
  }
  float *logits = f, *probs = logits + rows * experts, *scores = probs + rows * experts;
  float *xs = scores + slots, *gate = xs + rows * h, *up = gate + rows * inter;
  float *ys = up + rows * inter, *choice = ys + slots * h;
  int32_t *ids = iv, *order = ids + slots, *start = order + slots;

  product(level, x, h, rows, h, router, experts, logits, experts);
  addBias(logits, rows, experts, routing->routerBias);
  for (int64_t t = 0; t < rows; ++t)
    route(logits + t * experts, experts, topK, routing, probs + t * experts, choice,
          ids + t * topK, scores + t * topK);

  // Slots grouped by expert, in token order within a group.
  for (int64_t e = 0; e <= experts; ++e)
    start[e] = 0;
  for (int64_t s = 0; s < slots; ++s)
    ++start[ids[s] + 1];
  for (int64_t e = 0; e < experts; ++e)
    start[e + 1] += start[e];
  for (int64_t s = 0; s < slots; ++s)
    order[start[ids[s]]++] = (int32_t)s;
  for (int64_t e = experts; e > 0; --e)
    start[e] = start[e - 1];
  start[0] = 0;

  // Every rank routes every token: each counts all experts' tokens.
  uint64_t *load = layerLoad(router, experts);
  for (int64_t e = 0; load && e < experts; ++e)
    __atomic_fetch_add(&load[e], (uint64_t)(start[e + 1] - start[e]), __ATOMIC_RELAXED);

  int act = (int)((routing->flags >> XFMR_UK_MOE_ACTIVATION_SHIFT) & 0xff);
  uint64_t used = 0;
  for (int64_t e = 0; e < experts; ++e) {
    int64_t n = start[e + 1] - start[e];
    if (n == 0 || !owns(e, experts))
      continue;
    ++used;
    const int32_t *group = order + start[e];
    for (int64_t i = 0; i < n; ++i) {
      const float *src = x + (group[i] / topK) * h;
      for (int64_t c = 0; c < h; ++c)
        xs[i * h + c] = src[c];
    }
    gatedMLP(level, w, e, xs, n, act, gate, up, xs);
    for (int64_t i = 0; i < n; ++i) {
      float *dst = ys + (int64_t)group[i] * h;
      for (int64_t c = 0; c < h; ++c)
        dst[c] = xs[i * h + c];
    }
  }

  // out[t] = 0 + term_0 + term_1 ... in slot order, per element; slots of
  // another rank's experts are left out.
  for (int64_t t = 0; t < rows; ++t) {
    float *o = out + t * h;
    for (int64_t c = 0; c < h; ++c)
      o[c] = 0.0f;
    for (int64_t j = 0; j < topK; ++j) {
      int64_t s = t * topK + j;
      if (!owns(ids[s], experts))
        continue;
      const float *y = ys + s * h;
      for (int64_t c = 0; c < h; ++c) {
        float term = y[c] * scores[s];
        o[c] += term;
      }
    }
  }

  __atomic_fetch_add(&gStats[0], 1, __ATOMIC_RELAXED);
  __atomic_fetch_add(&gStats[1], (uint64_t)rows, __ATOMIC_RELAXED);
  __atomic_fetch_add(&gStats[2], (uint64_t)slots, __ATOMIC_RELAXED);
  uint64_t expertBytes = (uint64_t)(2 * matrixBytes(w->format, h, inter) +
                                    matrixBytes(w->format, inter, h));
  __atomic_fetch_add(&gStats[3], used * expertBytes, __ATOMIC_RELAXED);
  __atomic_fetch_add(&gStats[4], (uint64_t)experts * expertBytes, __ATOMIC_RELAXED);
  free(f);
  free(iv);
}

int64_t xfmr_uk_moe_constants_floats(int64_t flags, int64_t experts, int64_t h,
                                     int64_t inter) {
  int64_t n = XFMR_UK_MOE_CONSTANTS_HEADER;
  if (flags & XFMR_UK_MOE_ROUTER_BIAS)
    n += experts;
  if (flags & XFMR_UK_MOE_SELECTION_BIAS)
    n += experts;
  if (flags & XFMR_UK_MOE_EXPERT_BIASES)
    n += experts * (2 * inter + h);
  return n;
}

/// The routing and the experts' extras of a call from its constants
/// buffer (MoE.h); defaults without one.
static void readConstants(int64_t flags, const float *c, int64_t experts, Routing *r,
                          Experts *w) {
  *r = (Routing){flags, 0, 0, 1.0f};
  w->bg = w->bu = w->bd = 0;
  w->alpha = 1.0f;
  w->limit = INFINITY;
  w->upOffset = 0.0f;
  w->clamped = (flags & XFMR_UK_MOE_CLAMPED_SWIGLU) != 0;
  if (!c)
    return;
  r->scale = c[0];
  w->alpha = c[1];
  w->limit = c[2];
  w->upOffset = c[3];
  const float *next = c + XFMR_UK_MOE_CONSTANTS_HEADER;
  if (flags & XFMR_UK_MOE_ROUTER_BIAS) {
    r->routerBias = next;
    next += experts;
  }
  if (flags & XFMR_UK_MOE_SELECTION_BIAS) {
    r->bias = next;
    next += experts;
  }
  if (flags & XFMR_UK_MOE_EXPERT_BIASES) {
    w->bg = next;
    w->bu = w->bg + experts * w->inter;
    w->bd = w->bu + experts * w->inter;
  }
}

void xfmr_uk_moe_f32(const float *x, int64_t rows, int64_t h, int64_t inter, int64_t experts,
                     int64_t topK, int64_t flags, const float *router, const float *wg,
                     const float *wu, const float *wd, const float *constants, float *out) {
  Experts w = {.format = XFMR_UK_MOE_F32, .wg = wg, .wu = wu, .wd = wd, .h = h, .inter = inter};
  Routing r;
  readConstants(flags, constants, experts, &r, &w);
  moe(2, x, rows, experts, topK, &r, router, &w, out);
}

void xfmr_uk_moe_narrow(const float *x, int64_t rows, int64_t h, int64_t inter,
                        int64_t experts, int64_t topK, int64_t flags, int64_t format,
                        const float *router, const uint8_t *wg, const uint8_t *wu,
                        const uint8_t *wd, const float *sg, const float *su, const float *sd,
                        const float *constants, float *out) {
  Experts w = {.format = (int)format, .wg = wg, .wu = wu, .wd = wd,
               .sg = sg, .su = su, .sd = sd, .h = h, .inter = inter};
  Routing r;
  readConstants(flags, constants, experts, &r, &w);
  moe(2, x, rows, experts, topK, &r, router, &w, out);
}

void xfmr_uk_moe_shared_f32(const float *x, int64_t rows, int64_t h, int64_t inter,
                            int64_t activation, const float *wg, const float *wu,
                            const float *wd, const float *scale, float *out) {
  if (rows <= 0)
    return;
  size_t floats = (size_t)(2 * rows * inter + rows * h + rows);
  float *f = malloc(floats * sizeof(float));
  if (!f) {
    for (int64_t i = 0; i < rows * h; ++i)
      out[i] = NAN;
    return;
  }
  float *gate = f, *up = gate + rows * inter, *y = up + rows * inter, *s = y + rows * h;
  Experts shared = {
      .format = XFMR_UK_MOE_F32, .wg = wg, .wu = wu, .wd = wd, .h = h, .inter = inter};
  gatedMLP(2, &shared, 0, x, rows, (int)activation, gate, up, y);
  if (scale) {
    product(2, x, h, rows, h, scale, 1, s, 1);
    for (int64_t t = 0; t < rows; ++t)
      s[t] = 1.0f / (1.0f + expf(-s[t]));
  }
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t c = 0; c < h; ++c) {
      float term = scale ? s[t] * y[t * h + c] : y[t * h + c];
      out[t * h + c] += term;
    }
  free(f);
}

/// For tests: the same layer with the paths capped at `level`.
void xfmr_uk_moe_f32_at(int level, const float *x, int64_t rows, int64_t h, int64_t inter,
                        int64_t experts, int64_t topK, int64_t flags, const float *router,
                        const float *wg, const float *wu, const float *wd,
                        const float *constants, float *out) {
  Experts w = {.format = XFMR_UK_MOE_F32, .wg = wg, .wu = wu, .wd = wd, .h = h, .inter = inter};
  Routing r;
  readConstants(flags, constants, experts, &r, &w);
  moe(level, x, rows, experts, topK, &r, router, &w, out);
}
