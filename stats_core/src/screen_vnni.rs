//! The quantized screen's kernel for CPUs with AVX-512 VNNI (`screen::Kernel::Vnni`): the same integer sums as
//! the byte-plane kernel, with one instruction per 32 pair-updates and byte plane instead of two.
//!
//! `vpdpbusd` multiplies 4 unsigned bytes by 4 signed bytes and adds the four products into an i32 lane, on
//! top of what the lane held. A lane is a permutation; its 4 bytes are 4 columns: the broadcast byte plane of
//! their q (unsigned) times the compare masks of the permutation's labels (−1 where the column's label is the
//! row's). So one instruction covers 8 permutations × 4 columns of one plane, accumulating straight into
//! i32 — no i16 stage to flush and widen (the byte-plane kernel's `vpmaddubsw` + `vpaddw` + widening). Per
//! quad of columns and chunk of 32 permutations: 4 label loads, 4 compares, 3 broadcast loads and 12
//! `vpdpbusd` for 128 pair-updates. The twelve accumulators, four own-label vectors and four masks need the
//! 32 vector registers AVX-512VL gives. Integer sums are exact, so the result is bit-identical to the other
//! kernels: the per-row, per-tile integer is the same, and it is added to the f64 sums in the same order.
use crate::matrix::Distances;
use crate::permanova::{LANES, ROWS};
use crate::screen::COLS;
use rayon::prelude::*;
use std::arch::x86_64::*;

const QUADS: usize = COLS / 4;

/// Whether this CPU runs the VNNI kernel.
pub fn available() -> bool {
    std::is_x86_feature_detected!("avx512vnni")
        && std::is_x86_feature_detected!("avx512vl")
        && std::is_x86_feature_detected!("avx512bw")
        && std::is_x86_feature_detected!("avx512vbmi")
}

/// Byte labels: per chunk of LANES permutations, objects in quads (4m … 4m + 3), each quad as
/// [permutation][object of the quad] (128 bytes); n is padded to whole quads with label 0 (their q is 0).
pub fn pack_quads(labels: &[i32], perms: usize, n: usize) -> Vec<u8> {
    let quads = n.div_ceil(4);
    let chunks = perms.div_ceil(LANES);
    let mut out = vec![0u8; chunks * quads * 4 * LANES];
    out.par_chunks_mut(quads * 4 * LANES).enumerate().for_each(|(c, chunk)| {
        for q in 0..LANES {
            let p = if c * LANES + q < perms { c * LANES + q } else { 0 };
            for (j, &code) in labels[p * n..(p + 1) * n].iter().enumerate() {
                chunk[((j / 4) * LANES + q) * 4 + j % 4] = code as u8;
            }
        }
    });
    out
}

/// Row i's −Σ_j q_ij [label_j = own] per plane and permutation (4 vectors of 8) over quads [m0, m1) of a tile.
#[inline(always)]
unsafe fn row_quads(planes: &[u32], labels: &[u8], own: &[__m256i; 4], m0: usize, m1: usize) -> [[__m256i; 4]; 3] {
    assert!(m1 <= QUADS && planes.len() >= 3 * QUADS && labels.len() >= m1 * 4 * LANES, "a tile within its buffers");
    let mut acc = [[_mm256_setzero_si256(); 4]; 3];
    for m in m0..m1 {
        let lp = labels.as_ptr().add(m * 4 * LANES) as *const __m256i;
        let mask: [__m256i; 4] = std::array::from_fn(|v| _mm256_cmpeq_epi8(_mm256_loadu_si256(lp.add(v)), own[v]));
        for (b, accb) in acc.iter_mut().enumerate() {
            let q = _mm256_set1_epi32(*planes.get_unchecked(b * QUADS + m) as i32);
            for (a, k) in accb.iter_mut().zip(&mask) {
                *a = _mm256_dpbusd_epi32(*a, q, *k);
            }
        }
    }
    acc
}

/// Row i's q = round(d² · scale) for columns [j0, c1) of the tile from c0 (0 elsewhere) as three byte planes of
/// quads (`t[b · QUADS + m]`: byte b of columns c0 + 4m … c0 + 4m + 3), 16 columns per step.
///
/// Rounding is `f64::round`'s (half away from zero) exactly, as the other kernels round: for x ≥ 0 it is
/// trunc(x) + [x − trunc(x) ≥ ½], the subtraction being exact. Columns outside [j0, c1) are masked out of the
/// loads, so nothing outside the row is read (masked-out lanes of an AVX-512 load do not fault).
#[target_feature(enable = "avx2,avx512f,avx512vl,avx512bw,avx512vbmi")]
unsafe fn tile_planes(row: &[f64], i: usize, j0: usize, c0: usize, c1: usize, scale: f64, t: &mut [u32]) {
    assert!(t.len() == 3 * QUADS && c1 - c0 <= COLS && j0 > i && c0 <= j0 && j0 - i - 1 <= row.len(), "a tile");
    // output byte 16b + k ← byte b of dword k (column k of the 16)
    let gather: [u8; 64] = std::array::from_fn(|o| if o < 48 { ((o % 16) * 4 + o / 16) as u8 } else { 0 });
    let gather = _mm512_loadu_si512(gather.as_ptr() as *const _);
    let (half, scale) = (_mm512_set1_pd(0.5), _mm512_set1_pd(scale));
    let one = _mm256_set1_epi32(1);
    // column j is row[j − i − 1]; for columns before j0 the address is formed but only used under a mask
    let base = row.as_ptr().wrapping_sub(i + 1);
    let mut m = ((j0 - c0) / 4) & !3;
    while m < (c1 - c0).div_ceil(4) {
        let j = c0 + 4 * m;
        let below = j0.saturating_sub(j).min(16); // lanes before j0
        let inside = c1.saturating_sub(j).min(16); // lanes before c1
        let keep = ((1u32 << inside) - 1) & !((1u32 << below) - 1);
        let mut q = [_mm256_setzero_si256(); 2];
        for (h, qh) in q.iter_mut().enumerate() {
            let v = _mm512_maskz_loadu_pd((keep >> (8 * h)) as __mmask8, base.wrapping_add(j + 8 * h));
            let x = _mm512_mul_pd(_mm512_mul_pd(v, v), scale);
            let whole = _mm512_roundscale_pd::<{ _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC }>(x);
            let up = _mm512_cmp_pd_mask::<_CMP_GE_OQ>(_mm512_sub_pd(x, whole), half);
            let w = _mm512_cvttpd_epi32(whole);
            *qh = _mm256_mask_add_epi32(w, up, w, one);
        }
        let sixteen = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(q[0]), q[1]);
        let bytes = _mm512_permutexvar_epi8(gather, sixteen);
        let out = t.as_mut_ptr().add(m) as *mut __m128i;
        _mm_storeu_si128(out, _mm512_extracti32x4_epi32::<0>(bytes));
        _mm_storeu_si128(out.add(QUADS / 4), _mm512_extracti32x4_epi32::<1>(bytes));
        _mm_storeu_si128(out.add(QUADS / 2), _mm512_extracti32x4_epi32::<2>(bytes));
        m += 4;
    }
}

/// `screen::task_body` for quad labels (`pack_quads`); same integer sums, same order of f64 additions.
///
/// # Safety
/// The CPU must support AVX-512 VNNI, VL, BW and VBMI (`available`).
#[target_feature(enable = "avx2,avx512f,avx512vl,avx512bw,avx512vnni,avx512vbmi")]
pub unsafe fn task(d: Distances<'_>, packed: &[u8], inv: &[f64], scale: f64, r0: usize, r1: usize, out: &mut [f64]) {
    assert!(r1 - r0 <= ROWS && out.len().is_multiple_of(LANES), "a task of at most ROWS rows over whole chunks");
    let n = d.n;
    let quads = n.div_ceil(4);
    let chunks = out.len() / LANES;
    // Own label of object i in every byte of each permutation's dword: byte 4q + e ← byte 4q + i % 4.
    let pick: [__m256i; 4] = std::array::from_fn(|e| {
        let idx: [u8; 32] = std::array::from_fn(|b| ((b % 16) & !3) as u8 + e as u8);
        _mm256_loadu_si256(idx.as_ptr() as *const __m256i)
    });
    let mut planes = vec![0u32; ROWS * 3 * QUADS];
    // inv[own label] of each row of the task for every permutation, looked up once per task
    let width = chunks * LANES;
    let mut weights = vec![0.0f64; ROWS * width];
    for i in r0..r1 {
        for p in 0..width {
            let own = packed[(p / LANES) * quads * 4 * LANES + ((i / 4) * LANES + p % LANES) * 4 + i % 4];
            weights[(i - r0) * width + p] = inv[own as usize];
        }
    }
    // tiles start where the other kernels' do (r0 is a multiple of ROWS, so of 4): identical tiles, identical sums
    let mut c0 = r0 & !3;
    while c0 < n {
        let c1 = (c0 + COLS).min(n);
        let tile_quads = (c1 - c0).div_ceil(4);
        let last = r1.min(c1 - 1);
        for i in r0..last {
            let j0 = c0.max(i + 1);
            let t = &mut planes[(i - r0) * 3 * QUADS..(i - r0 + 1) * 3 * QUADS];
            tile_planes(d.row(i), i, j0, c0, c1, scale, t);
        }
        for c in 0..chunks {
            let labels = &packed[c * quads * 4 * LANES..(c + 1) * quads * 4 * LANES];
            let tile_labels = &labels[(c0 / 4) * 4 * LANES..];
            let slot = out[c * LANES..(c + 1) * LANES].as_mut_ptr();
            for i in r0..last {
                let own_quad = labels.as_ptr().add((i / 4) * 4 * LANES) as *const __m256i;
                let own: [__m256i; 4] =
                    std::array::from_fn(|v| _mm256_shuffle_epi8(_mm256_loadu_si256(own_quad.add(v)), pick[i % 4]));
                let j0 = c0.max(i + 1);
                let t = &planes[(i - r0) * 3 * QUADS..(i - r0 + 1) * 3 * QUADS];
                let acc = row_quads(t, tile_labels, &own, (j0 - c0) / 4, tile_quads);
                let w = weights[(i - r0) * width + c * LANES..(i - r0) * width + (c + 1) * LANES].as_ptr();
                let [a0, a1, a2] = acc;
                for (v, ((x0, x1), x2)) in a0.iter().zip(&a1).zip(&a2).enumerate() {
                    // −Σq ∈ [−2³¹, 0] and every partial sum lies between it and 0: exact in i32
                    let sum = _mm256_add_epi32(
                        _mm256_add_epi32(*x0, _mm256_slli_epi32::<8>(*x1)),
                        _mm256_slli_epi32::<16>(*x2),
                    );
                    // slot += Σq · inv[own]: the same product and sum, rounded the same, as the scalar kernels
                    let total = _mm512_sub_pd(_mm512_setzero_pd(), _mm512_cvtepi32_pd(sum));
                    let add = _mm512_mul_pd(total, _mm512_loadu_pd(w.add(8 * v)));
                    _mm512_storeu_pd(slot.add(8 * v), _mm512_add_pd(_mm512_loadu_pd(slot.add(8 * v)), add));
                }
            }
        }
        c0 = c1;
    }
}
