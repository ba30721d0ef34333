//! Micro-benchmark of PERMANOVA inner-loop variants (run: cargo run --release --example permanova_lanes).
use std::time::Instant;
const L: usize = 16;

#[inline(always)]
fn sel_u8(row: &[f64], labels: &[u8], own: &[u8; L]) -> [f64; L] {
    let mut acc = [0.0f64; L];
    for (d, lj) in row.iter().zip(labels.chunks_exact(L)) {
        let d2 = d * d;
        for q in 0..L { acc[q] += if lj[q] == own[q] { d2 } else { 0.0 }; }
    }
    acc
}
#[inline(always)]
fn mask_u64(row: &[f64], labels: &[u64], own: &[u64; L]) -> [f64; L] {
    let mut acc = [0.0f64; L];
    for (d, lj) in row.iter().zip(labels.chunks_exact(L)) {
        let d2 = (d * d).to_bits();
        for q in 0..L { let m = ((lj[q] == own[q]) as u64).wrapping_neg(); acc[q] += f64::from_bits(d2 & m); }
    }
    acc
}
#[inline(always)]
fn mask_u8(row: &[f64], labels: &[u8], own: &[u8; L]) -> [f64; L] {
    let mut acc = [0.0f64; L];
    for (d, lj) in row.iter().zip(labels.chunks_exact(L)) {
        let d2 = (d * d).to_bits();
        let lj: &[u8; L] = lj.try_into().unwrap();
        for q in 0..L { let m = ((lj[q] == own[q]) as i64).wrapping_neg() as u64; acc[q] += f64::from_bits(d2 & m); }
    }
    acc
}
#[inline(always)]
fn mul_u8(row: &[f64], labels: &[u8], own: &[u8; L]) -> [f64; L] {
    let mut acc = [0.0f64; L];
    for (d, lj) in row.iter().zip(labels.chunks_exact(L)) {
        let d2 = d * d;
        let lj: &[u8; L] = lj.try_into().unwrap();
        for q in 0..L { acc[q] += d2 * ((lj[q] == own[q]) as u8 as f64); }
    }
    acc
}

macro_rules! mv { ($name:ident, $f:ident, $t:ty) => {
    #[target_feature(enable = "avx2")]
    unsafe fn $name(row: &[f64], labels: &[$t], own: &[$t; L]) -> [f64; L] { $f(row, labels, own) }
}}
mv!(a_sel_u8, sel_u8, u8);
mv!(a_mask_u64, mask_u64, u64);
mv!(a_mask_u8, mask_u8, u8);
mv!(a_mul_u8, mul_u8, u8);

#[target_feature(enable = "avx2")]
unsafe fn intr_u8(row: &[f64], labels: &[u8], own: &[u8; L]) -> [f64; L] {
    use std::arch::x86_64::*;
    let ov = _mm_loadu_si128(own.as_ptr() as *const __m128i);
    let (mut a0, mut a1, mut a2, mut a3) = (_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd());
    let lp = labels.as_ptr();
    for (j, &d) in row.iter().enumerate() {
        let d2 = _mm256_set1_pd(d * d);
        let eq = _mm_cmpeq_epi8(_mm_loadu_si128(lp.add(j * L) as *const __m128i), ov);
        a0 = _mm256_add_pd(a0, _mm256_and_pd(d2, _mm256_castsi256_pd(_mm256_cvtepi8_epi64(eq))));
        a1 = _mm256_add_pd(a1, _mm256_and_pd(d2, _mm256_castsi256_pd(_mm256_cvtepi8_epi64(_mm_srli_si128(eq, 4)))));
        a2 = _mm256_add_pd(a2, _mm256_and_pd(d2, _mm256_castsi256_pd(_mm256_cvtepi8_epi64(_mm_srli_si128(eq, 8)))));
        a3 = _mm256_add_pd(a3, _mm256_and_pd(d2, _mm256_castsi256_pd(_mm256_cvtepi8_epi64(_mm_srli_si128(eq, 12)))));
    }
    let mut out = [0.0f64; L];
    _mm256_storeu_pd(out.as_mut_ptr(), a0);
    _mm256_storeu_pd(out.as_mut_ptr().add(4), a1);
    _mm256_storeu_pd(out.as_mut_ptr().add(8), a2);
    _mm256_storeu_pd(out.as_mut_ptr().add(12), a3);
    out
}

#[target_feature(enable = "avx2")]
unsafe fn intr_u8_x2(row: &[f64], labels: &[u8], own: &[u8; L]) -> [f64; L] {
    // two pairs per iteration, separate accumulators to hide add latency
    use std::arch::x86_64::*;
    let ov = _mm_loadu_si128(own.as_ptr() as *const __m128i);
    let z = _mm256_setzero_pd();
    let (mut a0, mut a1, mut a2, mut a3) = (z, z, z, z);
    let (mut b0, mut b1, mut b2, mut b3) = (z, z, z, z);
    let lp = labels.as_ptr();
    let m = row.len() / 2 * 2;
    let mut j = 0;
    while j < m {
        let d2 = _mm256_set1_pd(row[j] * row[j]);
        let e2 = _mm256_set1_pd(row[j + 1] * row[j + 1]);
        let eq = _mm_cmpeq_epi8(_mm_loadu_si128(lp.add(j * L) as *const __m128i), ov);
        let fq = _mm_cmpeq_epi8(_mm_loadu_si128(lp.add(j * L + L) as *const __m128i), ov);
        a0 = _mm256_add_pd(a0, _mm256_and_pd(d2, _mm256_castsi256_pd(_mm256_cvtepi8_epi64(eq))));
        a1 = _mm256_add_pd(a1, _mm256_and_pd(d2, _mm256_castsi256_pd(_mm256_cvtepi8_epi64(_mm_srli_si128(eq, 4)))));
        a2 = _mm256_add_pd(a2, _mm256_and_pd(d2, _mm256_castsi256_pd(_mm256_cvtepi8_epi64(_mm_srli_si128(eq, 8)))));
        a3 = _mm256_add_pd(a3, _mm256_and_pd(d2, _mm256_castsi256_pd(_mm256_cvtepi8_epi64(_mm_srli_si128(eq, 12)))));
        b0 = _mm256_add_pd(b0, _mm256_and_pd(e2, _mm256_castsi256_pd(_mm256_cvtepi8_epi64(fq))));
        b1 = _mm256_add_pd(b1, _mm256_and_pd(e2, _mm256_castsi256_pd(_mm256_cvtepi8_epi64(_mm_srli_si128(fq, 4)))));
        b2 = _mm256_add_pd(b2, _mm256_and_pd(e2, _mm256_castsi256_pd(_mm256_cvtepi8_epi64(_mm_srli_si128(fq, 8)))));
        b3 = _mm256_add_pd(b3, _mm256_and_pd(e2, _mm256_castsi256_pd(_mm256_cvtepi8_epi64(_mm_srli_si128(fq, 12)))));
        j += 2;
    }
    let mut out = [0.0f64; L];
    _mm256_storeu_pd(out.as_mut_ptr(), _mm256_add_pd(a0, b0));
    _mm256_storeu_pd(out.as_mut_ptr().add(4), _mm256_add_pd(a1, b1));
    _mm256_storeu_pd(out.as_mut_ptr().add(8), _mm256_add_pd(a2, b2));
    _mm256_storeu_pd(out.as_mut_ptr().add(12), _mm256_add_pd(a3, b3));
    out
}

#[target_feature(enable = "avx2")]
unsafe fn blend32(row: &[f64], labels: &[u8], own: &[u8; 32]) -> [f64; 32] {
    use std::arch::x86_64::*;
    let ov = _mm256_loadu_si256(own.as_ptr() as *const __m256i);
    let lp = labels.as_ptr();
    let zero = _mm256_setzero_pd();
    let mut acc = [zero; 8];
    for (j, &d) in row.iter().enumerate() {
        let d2 = _mm256_set1_pd(d * d);
        let mut m = _mm256_cmpeq_epi8(_mm256_loadu_si256(lp.add(j * 32) as *const __m256i), ov);
        for (s, a) in acc.iter_mut().enumerate() {
            if s > 0 { m = _mm256_slli_epi64::<8>(m); }
            *a = _mm256_add_pd(*a, _mm256_blendv_pd(zero, d2, _mm256_castsi256_pd(m)));
        }
    }
    let mut out = [0.0f64; 32];
    for (s, a) in acc.iter().enumerate() { _mm256_storeu_pd(out.as_mut_ptr().add(4 * s), *a); }
    out
}
#[target_feature(enable = "avx2")]
unsafe fn blend32_f32(row: &[f64], labels: &[u8], own: &[u8; 32]) -> [f32; 32] {
    use std::arch::x86_64::*;
    let ov = _mm256_loadu_si256(own.as_ptr() as *const __m256i);
    let lp = labels.as_ptr();
    let zero = _mm256_setzero_ps();
    let mut acc = [zero; 4];
    for (j, &d) in row.iter().enumerate() {
        let d2 = _mm256_set1_ps((d * d) as f32);
        let mut m = _mm256_cmpeq_epi8(_mm256_loadu_si256(lp.add(j * 32) as *const __m256i), ov);
        for (s, a) in acc.iter_mut().enumerate() {
            if s > 0 { m = _mm256_slli_epi32::<8>(m); }
            *a = _mm256_add_ps(*a, _mm256_blendv_ps(zero, d2, _mm256_castsi256_ps(m)));
        }
    }
    let mut out = [0.0f32; 32];
    for (s, a) in acc.iter().enumerate() { _mm256_storeu_ps(out.as_mut_ptr().add(8 * s), *a); }
    out
}

fn main() {
    let n = 4096;
    let row: Vec<f64> = (0..n).map(|i| (i as f64 * 0.37).sin().abs()).collect();
    let l8: Vec<u8> = (0..n * 32).map(|i| ((i * 7919) % 3) as u8).collect();
    let l64: Vec<u64> = l8[..n * L].iter().map(|&v| v as u64).collect();
    let o8 = [1u8; L];
    let o64 = [1u64; L];
    let reps = 2000;
    let ups = (n * L * reps) as f64;
    macro_rules! time { ($label:expr, $e:expr) => {{
        let t = Instant::now(); let mut s = 0.0;
        for _ in 0..reps { s += std::hint::black_box($e)[3]; }
        println!("{:12} {:.2} G updates/s/core  ({s})", $label, ups / t.elapsed().as_secs_f64() / 1e9);
    }}}
    time!("sel_u8", sel_u8(&row, &l8, &o8));
    time!("avx sel_u8", unsafe { a_sel_u8(&row, &l8, &o8) });
    time!("mask_u64", mask_u64(&row, &l64, &o64));
    time!("avx mask_u64", unsafe { a_mask_u64(&row, &l64, &o64) });
    time!("mask_u8", mask_u8(&row, &l8, &o8));
    time!("avx mask_u8", unsafe { a_mask_u8(&row, &l8, &o8) });
    time!("intr_u8", unsafe { intr_u8(&row, &l8, &o8) });
    time!("intr_u8_x2", unsafe { intr_u8_x2(&row, &l8, &o8) });
    let o32 = [1u8; 32];
    let ups32 = (n * 32 * reps) as f64;
    macro_rules! time32 { ($label:expr, $e:expr) => {{
        let t = Instant::now(); let mut s = 0.0;
        for _ in 0..reps { s += std::hint::black_box($e)[3] as f64; }
        println!("{:12} {:.2} G updates/s/core  ({s})", $label, ups32 / t.elapsed().as_secs_f64() / 1e9);
    }}}
    time32!("blend32", unsafe { blend32(&row, &l8, &o32) });
    time32!("blend32_f32", unsafe { blend32_f32(&row, &l8, &o32) });
    time!("intr_u8_x2", unsafe { intr_u8_x2(&row, &l8, &o8) });
    time32!("blend32", unsafe { blend32(&row, &l8, &o32) });
    time32!("blend32_f32", unsafe { blend32_f32(&row, &l8, &o32) });
    time!("mul_u8", mul_u8(&row, &l8, &o8));
    time!("avx mul_u8", unsafe { a_mul_u8(&row, &l8, &o8) });
}
