//! Times Kendall's two counting methods per vector length, to place `kendall::PAIRWISE_MAX`:
//! `cargo run --release --example kendall_counts`. Both must give the same counts (asserted).
use stats_core_native::kendall::{counts_pairwise, counts_sorted, Counts};
use std::time::Instant;

type Method = fn(&[f64], &[f64]) -> Counts;

fn main() {
    let mut state = 7u64;
    let mut next = |levels: u64| {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((state >> 33) % levels) as f64
    };
    println!("| values | levels | pairwise ns/tau | Knight ns/tau |");
    println!("|---|---|---|---|");
    for levels in [5u64, 1000] {
        for n in [32usize, 64, 96, 128, 192, 256] {
            let rows = 1_000_000 / n;
            let x: Vec<f64> = (0..rows * n).map(|_| next(levels)).collect();
            let y: Vec<f64> = (0..rows * n).map(|_| next(levels)).collect();
            let mut best = [f64::MAX; 2];
            for _ in 0..5 {
                let methods: [Method; 2] = [counts_pairwise, counts_sorted];
                for (m, count) in methods.iter().enumerate() {
                    let start = Instant::now();
                    let total: i64 = x.chunks(n).zip(y.chunks(n)).map(|(a, b)| count(a, b).score).sum();
                    std::hint::black_box(total);
                    best[m] = best[m].min(start.elapsed().as_secs_f64() / rows as f64);
                }
            }
            for (a, b) in x.chunks(n).zip(y.chunks(n)).take(50) {
                assert_eq!(counts_pairwise(a, b), counts_sorted(a, b));
            }
            println!("| {n} | {levels} | {:.0} | {:.0} |", best[0] * 1e9, best[1] * 1e9);
        }
    }
}
