// The moe_combine reference's work split, run on the CPU (tests/bench/test_reference.py).
//
// The test prepends the reference's "combine schedule" block (cut from
// benchmarks/reference/<target>/moe_combine/kernels.cu: ref_share, ref_pieces, ref_piece,
// ref_row_item, ref_sum_item) and builds this file with the host compiler, with
// REF_NRANKS, REF_P_TOKENS, REF_P_K, REF_ROW (bytes of an f32 row) on the command line.
// It then plays the kernel's two loops for every rank, CTA and warp (the loop heads are the
// kernel's; the test checks that they still are): the rows back (after every rank's
// "ready": counts known), then, after every rank's "landed", the weighted sums.  The copy
// and the sums are plain scalar loops; what is under test is which rows, bytes and tokens
// each item covers.
//
//   moe_combine_host CTAS WARPS IN OUT
//
// IN, per rank: ntok (i32), topk_rank (i32[tokens * k]), topk_weight (f32[tokens * k]),
// expert_out (f32[nranks * tokens * hidden]), y (f32[tokens * hidden]: its values before
// the launch).  OUT: y of every rank after it.  `back` starts as NaN, so a sum that reads
// a row nobody wrote shows.  Exit 1, with a message, if an item is not one of its CTA's
// tokens below the owner's count, or a byte of a row is moved twice.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define REF_HIDDEN (REF_ROW / 4)

static int fail(const char* what, int me, int cta, unsigned long long t) {
  std::fprintf(stderr, "%s (rank %d, CTA %d, token %llu)\n", what, me, cta, t);
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 5) return 2;
  const int ctas = std::atoi(argv[1]), warps = std::atoi(argv[2]);
  const uint64_t tk = REF_P_TOKENS * REF_P_K, rows = REF_NRANKS * REF_P_TOKENS;
  std::vector<int32_t> ntok(REF_NRANKS);
  std::vector<std::vector<int32_t>> route(REF_NRANKS, std::vector<int32_t>(tk));
  std::vector<std::vector<float>> weight(REF_NRANKS, std::vector<float>(tk));
  std::vector<std::vector<float>> expert(REF_NRANKS, std::vector<float>(rows * REF_HIDDEN));
  std::vector<std::vector<float>> y(REF_NRANKS, std::vector<float>(REF_P_TOKENS * REF_HIDDEN));
  std::vector<std::vector<float>> back(REF_NRANKS, std::vector<float>(rows * REF_HIDDEN, NAN));
  std::vector<std::vector<int>> moved(REF_NRANKS, std::vector<int>(rows * REF_ROW, 0));
  FILE* in = std::fopen(argv[3], "rb");
  if (in == nullptr) return 2;
  for (int r = 0; r < REF_NRANKS; ++r) {
    bool ok = std::fread(&ntok[r], 4, 1, in) == 1;
    ok = ok && std::fread(route[r].data(), 4, tk, in) == tk;
    ok = ok && std::fread(weight[r].data(), 4, tk, in) == tk;
    ok = ok && std::fread(expert[r].data(), 4, expert[r].size(), in) == expert[r].size();
    ok = ok && std::fread(y[r].data(), 4, y[r].size(), in) == y[r].size();
    if (!ok) return 2;
  }
  std::fclose(in);
  // the rows back: CTA `cta` of rank `me`, its warps in turn (they write disjoint bytes)
  for (int me = 0; me < REF_NRANKS; ++me)
    for (int cta = 0; cta < ctas; ++cta) {
      uint64_t share[REF_NRANKS], pairs = 0;
      for (int p = 0; p < REF_NRANKS; ++p) {
        share[p] = ref_share(static_cast<uint64_t>(ntok[p]), cta, ctas);
        pairs += share[p];
      }
      const uint64_t chunks = ref_pieces(pairs, warps, REF_COPY_CHUNKS);
      for (int warp = 0; warp < warps; ++warp)
        for (uint64_t j = warp; j < pairs * chunks; j += warps) {
          int p;
          uint64_t t, lo, hi;
          ref_row_item(j, chunks, share, me, cta, ctas, &p, &t, &lo, &hi);
          if (t >= static_cast<uint64_t>(ntok[p]) || t % ctas != static_cast<uint64_t>(cta))
            return fail("a row item outside its CTA's tokens below the count", me, cta, t);
          if (lo % 16 != 0 || hi % 16 != 0 || hi > REF_ROW)
            return fail("a row piece not in 16-byte vectors of the row", me, cta, t);
          bool mine = false;
          for (uint64_t i = 0; i < REF_P_K; ++i) mine = mine || route[p][t * REF_P_K + i] == me;
          if (!mine) continue;
          const uint64_t dst = (static_cast<uint64_t>(me) * REF_P_TOKENS + t) * REF_ROW;
          const uint64_t src = (static_cast<uint64_t>(p) * REF_P_TOKENS + t) * REF_ROW;
          for (uint64_t b = lo; b < hi; ++b)
            if (moved[p][dst + b]++ != 0) return fail("a byte moved twice", me, cta, t);
          std::memcpy(reinterpret_cast<char*>(back[p].data()) + dst + lo,
                      reinterpret_cast<const char*>(expert[me].data()) + src + lo, hi - lo);
        }
    }
  // the sums, each after its CTA's "landed" waits (every rank's rows are back by now)
  std::vector<std::vector<int>> summed(REF_NRANKS, std::vector<int>(REF_P_TOKENS * REF_HIDDEN, 0));
  for (int me = 0; me < REF_NRANKS; ++me)
    for (int cta = 0; cta < ctas; ++cta) {
      const uint64_t mine_n = ref_share(static_cast<uint64_t>(ntok[me]), cta, ctas);
      const uint64_t parts = ref_pieces(mine_n, warps, REF_SUM_CHUNKS);
      for (int warp = 0; warp < warps; ++warp)
        for (uint64_t j = warp; j < mine_n * parts; j += warps) {
          uint64_t t, lo, hi;
          ref_sum_item(j, parts, cta, ctas, &t, &lo, &hi);
          if (t >= static_cast<uint64_t>(ntok[me]) || t % ctas != static_cast<uint64_t>(cta))
            return fail("a sum item outside its CTA's tokens below the count", me, cta, t);
          float w[REF_NRANKS] = {};
          for (uint64_t i = 0; i < REF_P_K; ++i)
            for (int p = 0; p < REF_NRANKS; ++p)
              w[p] += route[me][t * REF_P_K + i] == p ? weight[me][t * REF_P_K + i] : 0.0f;
          for (uint64_t e = lo / 4; e < hi / 4; ++e) {
            float acc = 0.0f;
            for (int p = 0; p < REF_NRANKS; ++p)
              if (w[p] != 0.0f)
                acc += w[p] * back[me][(static_cast<uint64_t>(p) * REF_P_TOKENS + t) * REF_HIDDEN + e];
            if (summed[me][t * REF_HIDDEN + e]++ != 0) return fail("an element summed twice", me, cta, t);
            y[me][t * REF_HIDDEN + e] = acc;
          }
        }
    }
  FILE* out = std::fopen(argv[4], "wb");
  if (out == nullptr) return 2;
  for (int r = 0; r < REF_NRANKS; ++r) std::fwrite(y[r].data(), 4, y[r].size(), out);
  std::fclose(out);
  return 0;
}
