//! `cell_sums::cell_column_quanta` on CPUs with AVX-512 VNNI: the same exact integer sums M = X̃ᵀ U X̃, with
//! one `vpdpbusd` per 64 pair-updates of one design column and byte plane instead of a masked add per 16.
//!
//! q ≤ 2²³ splits into three byte planes; each row's planes are stored once per call in quads of objects
//! (byte e of a plane's dword = object 4m + e). A design column's 0/1 values under 16 permutations are bytes
//! [quad][permutation][object of the quad] — one 512-bit vector per quad — so `vpdpbusd` (unsigned plane bytes ×
//! signed 0/1 bytes, four products added into each permutation's i32 lane) gives 16 permutations × 4 objects of
//! Σ_j q_ij x_s(c_j) per instruction and plane. The three planes' broadcasts serve every column of a group
//! (up to GROUP columns, 3 accumulators each, in vector registers), so a row is swept once per group — once
//! for every model of rank ≤ 6 — against once per column by the AVX2 kernel. Row sums are
//! combined in u64 and added to M under each lane's own-cell columns; integer sums are exact, so the result
//! equals the AVX2 and scalar kernels' bit for bit, whatever the order or the number of threads.
use crate::cell_sums::LANES;
use rayon::prelude::*;
use std::arch::x86_64::*;

/// Design columns swept together: 3 accumulators each, 3 plane broadcasts and a mask. LLVM keeps 5 columns'
/// accumulators in registers; from 6 on it spills some to the stack in the inner loop (seen in the assembly;
/// measured, CPU seconds at n = 3,000: 8 columns in one group 0.92 s, in two groups of 4 0.65 s).
const GROUP: usize = 5;

/// Whether this CPU runs the VNNI kernel.
pub fn available() -> bool {
    std::is_x86_feature_detected!("avx512f")
        && std::is_x86_feature_detected!("avx512bw")
        && std::is_x86_feature_detected!("avx512vnni")
}

/// The quanta as byte planes, row by row.
struct Planes {
    /// Row i's byte planes of q_ij from quad (i + 1) / 4 to the last, [quad][plane] dwords, 0 for j ≤ i or j ≥ n.
    planes: Vec<u32>,
    /// Where each row starts in `planes` (n + 1 offsets).
    offsets: Vec<usize>,
    /// Each row's Σ_j q_ij: its sum against the constant column, the same under every permutation.
    totals: Vec<u64>,
}

/// `Planes` of the condensed quanta of n objects.
fn byte_planes(quanta: &[u32], n: usize) -> Planes {
    let quads = n.div_ceil(4);
    let mut offsets = Vec::with_capacity(n + 1);
    offsets.push(0);
    for i in 0..n {
        offsets.push(offsets[i] + 3 * (quads - (i + 1) / 4));
    }
    let mut planes = vec![0u32; offsets[n]];
    let mut rows = Vec::with_capacity(n);
    let mut rest = planes.as_mut_slice();
    for i in 0..n {
        let (row, tail) = rest.split_at_mut(offsets[i + 1] - offsets[i]);
        rows.push(row);
        rest = tail;
    }
    let totals = rows
        .into_par_iter()
        .enumerate()
        .map(|(i, row)| {
            let start = i * n - i * (i + 1) / 2; // condensed index of (i, i + 1)
            let first = (i + 1) / 4;
            let mut total = 0u64;
            for (j, &q) in (i + 1..n).zip(&quanta[start..start + n - i - 1]) {
                let (m, e) = (j / 4 - first, 8 * (j % 4));
                for b in 0..3 {
                    row[3 * m + b] |= ((q >> (8 * b)) & 0xff) << e;
                }
                total += q as u64;
            }
            total
        })
        .collect();
    Planes { planes, offsets, totals }
}

/// Σ_{j > i} q_ij x_s(c_j) per lane for the G columns whose masks start at `masks` (`quads` × 64 bytes apart):
/// row i's `planes` cover quads [first, quads).
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn row_group<const G: usize>(
    planes: &[u32],
    masks: &[u8],
    quads: usize,
    first: usize,
    out: &mut [[u64; LANES]],
) {
    assert!(planes.len() == 3 * (quads - first) && masks.len() >= G * quads * 64 && out.len() >= G);
    let mut acc = [[_mm512_setzero_si512(); 3]; G];
    let (pp, mp) = (planes.as_ptr(), masks.as_ptr());
    for m in first..quads {
        // SAFETY: 3 (m − first) + 2 < planes.len() and (g · quads + m) · 64 + 64 ≤ masks.len() (asserted).
        unsafe {
            let t = pp.add(3 * (m - first));
            let q = [
                _mm512_set1_epi32(*t as i32),
                _mm512_set1_epi32(*t.add(1) as i32),
                _mm512_set1_epi32(*t.add(2) as i32),
            ];
            for (g, a) in acc.iter_mut().enumerate() {
                let x = _mm512_loadu_si512(mp.add((g * quads + m) * 64) as *const _);
                for (ab, qb) in a.iter_mut().zip(&q) {
                    *ab = _mm512_dpbusd_epi32(*ab, *qb, x);
                }
            }
        }
    }
    for (a, w) in acc.iter().zip(out.iter_mut()) {
        // each plane's sum ≤ 255 n < 2³¹ (n < 2²³, asserted by the caller): exact in i32, non-negative
        let mut wide = [_mm512_setzero_si512(); 2];
        for (b, ab) in a.iter().enumerate() {
            let halves = [_mm512_castsi512_si256(*ab), _mm512_extracti64x4_epi64::<1>(*ab)];
            for (h, wh) in wide.iter_mut().enumerate() {
                let v = _mm512_cvtepu32_epi64(halves[h]);
                let v = match b {
                    0 => v,
                    1 => _mm512_slli_epi64::<8>(v),
                    _ => _mm512_slli_epi64::<16>(v),
                };
                *wh = _mm512_add_epi64(*wh, v);
            }
        }
        // SAFETY: `w` holds LANES = 16 u64, two 512-bit stores.
        unsafe {
            _mm512_storeu_si512(w.as_mut_ptr() as *mut _, wide[0]);
            _mm512_storeu_si512(w.as_mut_ptr().add(8) as *mut _, wide[1]);
        }
    }
}

/// `row_group` for g ≤ GROUP columns.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn row_columns(planes: &[u32], masks: &[u8], quads: usize, first: usize, out: &mut [[u64; LANES]]) {
    // SAFETY: the caller's CPU features are this function's.
    unsafe {
        match out.len() {
            1 => row_group::<1>(planes, masks, quads, first, out),
            2 => row_group::<2>(planes, masks, quads, first, out),
            3 => row_group::<3>(planes, masks, quads, first, out),
            4 => row_group::<4>(planes, masks, quads, first, out),
            5 => row_group::<5>(planes, masks, quads, first, out),
            g => unreachable!("a group of {g} columns"),
        }
    }
}

/// M (`sums`, lanes × (p+1)², as `cell_column_quanta`) for one group of up to LANES permutations.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn block(rows: &Planes, labels: &[u32], n: usize, columns: &[u8], p: usize, sums: &mut [u64]) {
    let (width, quads) = (p + 1, n.div_ceil(4));
    let lanes = labels.len() / n;
    // masks[s][m][q][e]: object 4m + e of permutation q is in column s's cells; own[i][s]: the same, lanes as bits
    let mut masks = vec![0u8; p * quads * 64];
    let mut own = vec![0u16; n * p];
    for (q, row) in labels.chunks_exact(n).enumerate() {
        for (j, &c) in row.iter().enumerate() {
            for s in 0..p {
                if columns[c as usize * p + s] != 0 {
                    masks[(s * quads + j / 4) * 64 + q * 4 + j % 4] = 1;
                    own[j * p + s] |= 1 << q;
                }
            }
        }
    }
    let groups = p.div_ceil(GROUP);
    // acc[r][s]: M[r][s] for the 16 lanes
    let mut acc = vec![[0u64; LANES]; width * width];
    let mut wide = vec![[0u64; LANES]; width];
    for i in 0..n {
        let first = (i + 1) / 4;
        let row = &rows.planes[rows.offsets[i]..rows.offsets[i + 1]];
        wide[0] = [rows.totals[i]; LANES];
        let mut s0 = 0;
        for g in 0..groups {
            let size = p / groups + usize::from(g < p % groups);
            // SAFETY: the caller's CPU features are this function's.
            unsafe { row_columns(row, &masks[s0 * quads * 64..], quads, first, &mut wide[1 + s0..1 + s0 + size]) };
            s0 += size;
        }
        for r in 0..width {
            let bits = if r == 0 { u16::MAX } else { own[i * p + r - 1] };
            if bits == 0 {
                continue;
            }
            let k = [bits as __mmask8, (bits >> 8) as __mmask8];
            for (a, w) in acc[r * width..(r + 1) * width].iter_mut().zip(&wide) {
                for (h, &kh) in k.iter().enumerate() {
                    // SAFETY: `a` and `w` hold 16 u64 each; half h is elements 8h … 8h + 7.
                    unsafe {
                        let (ap, wp) = (a.as_mut_ptr().add(8 * h) as *mut _, w.as_ptr().add(8 * h) as *const _);
                        let sum = _mm512_mask_add_epi64(
                            _mm512_loadu_si512(ap),
                            kh,
                            _mm512_loadu_si512(ap),
                            _mm512_loadu_si512(wp),
                        );
                        _mm512_storeu_si512(ap, sum);
                    }
                }
            }
        }
    }
    for q in 0..lanes {
        for (k, a) in acc.iter().enumerate() {
            sums[q * width * width + k] = a[q];
        }
    }
}

/// `cell_sums::cell_column_quanta` with AVX-512 VNNI (`available`): the same arguments, the same integers.
///
/// # Safety
/// The CPU must support AVX-512 F, BW and VNNI (`available`).
pub unsafe fn cell_column_quanta(quanta: &[u32], labels: &[u32], n: usize, columns: &[u8], p: usize) -> Vec<u64> {
    assert!(n > 0 && n < 1 << 23 && labels.len().is_multiple_of(n), "0 < n < 2^23 objects");
    let rows = labels.len() / n;
    let bins = (p + 1) * (p + 1);
    let planes = byte_planes(quanta, n);
    let mut out = vec![0u64; rows * bins];
    out.par_chunks_mut(LANES * bins).zip(labels.par_chunks(LANES * n)).for_each(|(sums, labels)| {
        // SAFETY: the caller's CPU supports AVX-512 F, BW and VNNI.
        unsafe { block(&planes, labels, n, columns, p, sums) }
    });
    out
}
